"""The helpers both packages share: atomic writes, tagged hashes, durations."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akm_run import durations
from akm_run.atomic import write_atomically
from akm_run.digest import tagged_sha256
from akm_run.planformat import SHA256


def test_an_atomic_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old")
    write_atomically(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_concurrent_atomic_writers_never_share_a_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    payloads = [bytes([65 + i]) * 200_000 for i in range(8)]
    errors: list[BaseException] = []

    def write(data: bytes) -> None:
        try:
            for _ in range(5):
                write_atomically(target, data)
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() in payloads  # one writer's bytes, whole
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_an_atomic_write_that_fails_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "is-a-directory"
    target.mkdir()
    with pytest.raises(OSError):
        write_atomically(target, "x")
    assert [p.name for p in tmp_path.iterdir()] == ["is-a-directory"]


def test_an_atomic_write_creates_the_file_as_the_umask_says(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        write_atomically(tmp_path / "a", "x")
        write_atomically(tmp_path / "b", "x", mode=0o600)
    finally:
        os.umask(previous)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "b").stat().st_mode & 0o777 == 0o600


@given(st.binary(max_size=256))
def test_tagged_hashes_are_sha256_in_the_plan_formats_form(data: bytes) -> None:
    tagged = tagged_sha256(data)
    assert SHA256.fullmatch(tagged) and tagged == "sha256:" + hashlib.sha256(data).hexdigest()


# The `--timeout` grammar akm-run had before the one duration grammar: it must accept the same texts.
_OPTION_BEFORE = re.compile(r"(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?")


def _option_before(text: str) -> int | None:
    if text.isdigit():
        return int(text) * 1000
    match = _OPTION_BEFORE.fullmatch(text)
    if not text or match is None or not any(match.groups()):
        return None
    h, m, s, ms = (int(g or 0) for g in match.groups())
    return ((h * 60 + m) * 60 + s) * 1000 + ms


def _option_now(text: str) -> int | None:
    try:
        return durations.parse_option(text)
    except ValueError:
        return None


@given(st.text(alphabet="0123456789hms", max_size=10))
def test_the_command_line_duration_grammar_is_unchanged(text: str) -> None:
    assert _option_now(text) == _option_before(text)


@pytest.mark.parametrize(
    ("text", "ms"), [("2h", 7_200_000), ("1h30m", 5_400_000), ("90s", 90_000), ("250ms", 250), ("30s1h", 3_630_000)]
)
def test_language_durations(text: str, ms: int) -> None:
    assert durations.parse(text) == ms


@given(st.integers(min_value=0, max_value=10**10))
def test_a_formatted_duration_reads_back_as_the_same_milliseconds(ms: int) -> None:
    assert durations.parse(durations.format_ms(ms)) == ms
    assert durations.parse_option(durations.format_ms(ms)) == ms
