"""Choosing the store from --database / $AKM_RUN_DATABASE: SQLite by default, PostgreSQL by URL, a clear
usage error for anything else, and never a password in a message."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import akm_run.database_url
from akm_run.database_url import EXTRA, DatabaseError, SharedStore, redacted, select


def test_no_url_is_the_sqlite_state_directory() -> None:
    assert select(None, {}) is None
    assert select("", {"AKM_RUN_DATABASE": "postgresql://h/db"}) is None  # an empty option wins too


def test_the_option_wins_over_the_environment() -> None:
    assert select("postgresql://a/one", {"AKM_RUN_DATABASE": "postgresql://b/two"}) == SharedStore("postgresql://a/one")
    assert select(None, {"AKM_RUN_DATABASE": "postgres://b/two"}) == SharedStore("postgres://b/two")


@pytest.mark.parametrize("url", ["mysql://h/db", "sqlite:///state.db", "state.db", "postgresql:/h/db", "://h"])
def test_other_schemes_are_usage_errors_that_say_what_to_use(url: str) -> None:
    with pytest.raises(DatabaseError, match=r"unsupported database URL .*postgresql://USER@HOST/DATABASE"):
        select(url, {})


def test_a_url_libpq_cannot_parse_is_refused_without_its_password() -> None:
    with pytest.raises(DatabaseError) as refused:
        select("postgresql://ada:hunter2@[::1/db", {})
    assert "malformed database URL postgresql://***@[::1/db" in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_a_printed_database_hides_its_password() -> None:
    assert str(SharedStore("postgresql://ada:hunter2@db.example/akm")) == "postgresql://ada:***@db.example/akm"
    assert "hunter2" not in repr(SharedStore("postgresql://ada:hunter2@db.example/akm"))
    assert redacted("postgresql://db.example/akm?host=/run/x") == "postgresql://db.example/akm?host=/run/x"


def test_the_extra_is_named_when_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(akm_run.database_url, "missing_modules", lambda: ["dbos"])
    with pytest.raises(DatabaseError, match=r"needs the `postgres` extra \(dbos not installed\)") as refused:
        select("postgresql://h/db", {})
    assert f"pip install '{EXTRA}'" in str(refused.value)


def test_a_url_of_bytes_that_are_not_utf8_is_refused_without_its_password() -> None:
    url = b"postgresql://ada:hunter2@db.example/\xff".decode("utf-8", "surrogateescape")  # as in os.environ
    with pytest.raises(DatabaseError, match="is not valid UTF-8") as refused:
        select(url, {})
    assert "hunter2" not in str(refused.value) and str(refused.value).isprintable()


@given(
    st.text(alphabet=st.characters(codec=None), max_size=200),  # surrogates too: undecodable bytes in os.environ
    st.text(alphabet="abcdefghij", min_size=6, max_size=12),
)
def test_any_text_selects_a_store_or_is_a_usage_error_that_hides_the_password(text: str, secret: str) -> None:
    assume(secret not in text)
    for url in (text, f"postgresql://ada:{secret}@{text}", f"postgres://ada:{secret}@h/{text}"):
        try:
            chosen = select(url, {})
        except DatabaseError as error:
            message = str(error)
        else:
            message = str(chosen)
        assert secret not in message.replace("ada", "")
        assert message.isprintable()
