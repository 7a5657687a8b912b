"""akm_run.activity: a progress line parsed (frame, pulse or invalid, never an exception), the
progress file read in whatever pieces a unit writes it, and a watch's silence and its events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run.activity import (
    MAX_LINE_BYTES,
    Beat,
    Board,
    Channel,
    Frame,
    Invalid,
    Pulse,
    Watch,
    parse_line,
)
from akm_run.progressfile import WINDOW_BYTES as SAMPLE_BYTES
from profiles import examples


def test_lines_parse_to_frames_pulses_or_invalid() -> None:
    assert parse_line(b'{"note": "Indexing", "progress": 240, "total": 1000}') == Frame("Indexing", 240, 1000)
    assert parse_line(b'{"progress": 0.5}') == Frame(None, 0.5, None)
    assert parse_line(b"{}") == Pulse()
    assert parse_line(b'{"usage": {"input_tokens": 3, "output_tokens": 4, "cache": {"read": 1}}}') == Pulse()
    for bad in (
        b"",
        b"null",
        b"[1]",
        b'{"note": 1}',
        b'{"progress": -1}',
        b'{"progress": true}',
        b'{"usage": {}}',
        b'{"note": "a", "note": "b"}',
        b'{"progress": NaN}',
        b"\xff\xfe",
        b'{"note": "' + b"x" * MAX_LINE_BYTES + b'"}',
        b'{"note": "line\\nbreak"}',
    ):
        assert isinstance(parse_line(bad), Invalid), bad


@settings(max_examples=examples(300))
@given(st.binary(max_size=MAX_LINE_BYTES + 10))
def test_no_line_raises(raw: bytes) -> None:
    assert isinstance(parse_line(raw), Frame | Pulse | Invalid)


@settings(max_examples=examples(100))
@given(st.lists(st.sampled_from([b'{"note": "a"}\n', b"{}\n", b"junk\n", b"x" * 5000 + b"\n"]), max_size=20), st.data())
def test_a_file_read_in_any_pieces_yields_its_lines(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("progress") / "p"
    channel = Channel(path)
    try:
        content = b"".join(lines)
        cuts = sorted(data.draw(st.lists(st.integers(0, len(content)), max_size=5)))
        start = 0
        with path.open("ab") as out:
            for cut in [*cuts, len(content)]:
                out.write(content[start:cut])
                out.flush()
                start = cut
                channel.read()
        expected = [parse_line(line.rstrip(b"\n")) for line in lines]
        assert [type(x) for x in channel.lines] == [type(x) for x in expected]
    finally:
        channel.close()
        path.unlink()


def test_a_backlog_is_skipped_to_its_newest_lines(tmp_path: Path) -> None:
    channel = Channel(tmp_path / "p")
    with (tmp_path / "p").open("ab") as out:
        out.write(b'{"note": "old"}\n' * (SAMPLE_BYTES // 8) + b'{"note": "new"}\n')
    channel.read()
    assert channel.lines[-1] == Frame("new") and len(channel.lines) == SAMPLE_BYTES // 16  # a window of whole lines
    channel.close()


def test_a_watch_journals_one_silent_event_per_stretch(tmp_path: Path) -> None:
    context = {"runId": "r", "unitId": "u", "stepId": "s", "attempt": 1}
    watch = Watch(context, Channel(tmp_path / "p"), 1000)
    beats: list[Beat] = []
    board = Board(beats.extend, period_s=0)
    board.add(watch)
    start = watch.last
    board.tick(now=start + 0.5)
    board.tick(now=start + 2)
    board.tick(now=start + 3)  # still silent: no second event
    (tmp_path / "p").write_bytes(json.dumps({"note": "back"}).encode() + b"\n")
    board.tick(force=True)
    assert [b.event for b in beats] == ["unit.silent", "unit.active"]
    assert beats[-1].progress == {"note": "back"}
    watch.channel.close()
