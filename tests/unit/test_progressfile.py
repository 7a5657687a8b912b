"""akm_run.progressfile: a progress file followed in whatever pieces a unit writes it, its backlog
skipped to a line's start, and the last wanted line found reading backwards, whatever surrounds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run.progressfile import SCAN_BYTES, WINDOW_BYTES, Follower
from akm_run.usagelines import MARKS, MAX_LINE_BYTES, usage_of
from profiles import examples

USAGE = b'{"usage": {"input_tokens": %d, "output_tokens": 0}}'
LINES = st.one_of(
    st.sampled_from([b"{}", b'{"note": "usage"}', b"x" * (MAX_LINE_BYTES + 3), b"not json \\ at all", b""]),
    st.integers(0, 99).map(lambda n: USAGE % n),
)


def _usage(line: bytes) -> bool:
    return usage_of(line.strip()) is not None


@settings(max_examples=examples(200))
@given(st.lists(LINES, max_size=30), st.booleans(), st.integers(0, 3))
def test_the_last_wanted_line_is_found_backwards(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], newline: bool, skip: int
) -> None:
    path = tmp_path_factory.mktemp("progress") / "p"
    content = b"\n".join(lines) + (b"\n" if newline and lines else b"")
    path.write_bytes(content)
    since = sum(len(line) + 1 for line in lines[:skip]) if skip < len(lines) else 0
    followed = Follower(path)
    followed.read()
    try:
        expected = next((x for x in reversed(content[since:].split(b"\n")) if _usage(x)), None)
        assert followed.last_line(_usage, since, MARKS) == expected
    finally:
        followed.close()


def test_the_scan_reads_a_usage_line_behind_any_amount_of_other_lines(tmp_path: Path) -> None:
    path = tmp_path / "p"
    path.write_bytes(b"{}\n" * 10 + USAGE % 7 + b"\n" + b"{}\n" * (3 * SCAN_BYTES // 3) + b"x" * (3 * SCAN_BYTES))
    followed = Follower(path)
    assert followed.last_line(_usage, 0, MARKS) is None  # nothing is read before the first read
    followed.read()
    assert followed.last_line(_usage, 0, MARKS) == USAGE % 7
    assert followed.last_line(_usage, 31 + len(USAGE % 7), MARKS) is None  # past it: nothing
    followed.close()


def test_a_backlog_is_skipped_to_the_start_of_a_line(tmp_path: Path) -> None:
    path = tmp_path / "p"
    followed = Follower.created(path)
    with path.open("ab") as out:
        out.write(b"{}\n" * WINDOW_BYTES + b"abc\n")
    lines = [line for line, _ in followed.read()]
    assert lines[-1] == b"abc" and set(lines[:-1]) == {b"{}"} and len(lines) <= WINDOW_BYTES // 3
    followed.close()


def test_a_replaced_or_truncated_file_is_read_from_its_start_after_a_last_look(tmp_path: Path) -> None:
    path, left = tmp_path / "p", []
    followed = Follower.created(path)
    followed.leaving = lambda: left.append(followed.last_line(lambda line: True, 0, (b"old",)))
    path.write_bytes(b"old 1\nold 2\n")
    assert [line for line, _ in followed.read()] == [b"old 1", b"old 2"]
    path.unlink()
    path.write_bytes(b"new\n")
    assert [line for line, _ in followed.read()] == [b"new"] and left == [b"old 2"]
    path.write_bytes(b"")  # truncated
    with path.open("ab") as out:
        out.write(b"x\n")
    assert [line for line, _ in followed.read()] == [b"x"] and len(left) == 2
    followed.close()
