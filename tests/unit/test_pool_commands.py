"""The shared store on the command line, in process: printed commands name the database without its
password, and the pool's options refuse what cannot work before anything connects."""

from __future__ import annotations

import argparse
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akm_run import cli, commands
from akm_run.database_url import shown
from akm_run.hints import Hints


@given(st.text(min_size=1, max_size=40).filter(lambda p: p.isprintable()))
def test_a_printed_database_url_never_holds_its_password(password: str) -> None:
    url = f"postgresql://ada:{quote(password, safe='')}@db.example:5433/akm?sslmode=require"
    assert shown(url) == "postgresql://ada@db.example:5433/akm?sslmode=require"


def test_hints_name_the_database_given_on_the_command_line_but_not_the_default_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "postgresql://ada:secret@db.example/akm"
    given_here = argparse.Namespace(database=url, state_dir=None)
    hint = commands.hints_for(given_here)
    assert hint == Hints(database="postgresql://ada@db.example/akm")
    assert hint("run", "R") == "akm-run run R --database postgresql://ada@db.example/akm"
    monkeypatch.setenv("AKM_RUN_DATABASE", url)
    assert commands.hints_for(argparse.Namespace(database=None, state_dir=None))("run", "R") == "akm-run run R"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["worker"], "a worker serves a shared store"),
        (["run", "plan.json", "--detach"], "--detach submits to a worker pool"),
    ],
)
def test_pool_options_without_a_database_are_usage_errors(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AKM_RUN_DATABASE", raising=False)
    assert cli.main(argv) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--takeover-after", "soon"], "invalid duration 'soon'"),
        (["--takeover-after", "100ms"], "--takeover-after must be at least 300ms"),
        (["--workdir", "/nonexistent/akm"], "is not a directory"),
    ],
)
def test_a_worker_refuses_bad_options_before_it_connects(
    options: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["worker", "--database", "postgresql://akm@db.invalid/akm", *options]
    assert cli.main(argv) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("verb", [["worker"], ["list"], ["status", "R"]])
def test_a_database_that_cannot_be_reached_is_one_clear_error_without_its_password(
    verb: list[str], capfd: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([*verb, "--database", "postgresql://ada:hunter2@127.0.0.1:1/akm"]) == 2
    err = capfd.readouterr().err
    assert "the database postgresql://ada:***@127.0.0.1:1/akm cannot be used" in err
    assert "hunter2" not in err and "Traceback" not in err
