"""akm_run.budgets: what a usage line is (strictly), the reader of a unit's progress file, and the
smallest budget left over a unit."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run.budgets import MAX_LINE_BYTES, Left, UsageReader, remaining, usage_of
from profiles import examples


def test_a_usage_line_counts_input_and_output_tokens_and_keeps_every_field() -> None:
    found = usage_of(b'{"usage": {"input_tokens": 18231, "output_tokens": 2210, "cost_usd": 0.41}}')
    assert found is not None and found.tokens == 20441
    assert found.fields == {"input_tokens": 18231, "output_tokens": 2210, "cost_usd": 0.41}


def test_a_count_past_the_exact_integers_is_held_there_and_spends_any_budget() -> None:
    found = usage_of(b'{"usage": {"input_tokens": 18446744073709551616, "output_tokens": 9007199254740991}}')
    assert found is not None and found.tokens == 2**53 - 1
    assert found.fields == {"input_tokens": 2**53 - 1, "output_tokens": 2**53 - 1}


@pytest.mark.parametrize(
    "line",
    [
        b'{"note": "Indexing", "progress": 240, "total": 1000}',  # an activity frame
        b"{}",  # a pulse
        b'{"usage": {"input_tokens": 1}}',
        b'{"usage": {"input_tokens": -1, "output_tokens": 0}}',
        b'{"usage": {"input_tokens": true, "output_tokens": 0}}',
        b'{"usage": {"input_tokens": 1.5, "output_tokens": 0}}',
        b'{"usage": {"input_tokens": "1", "output_tokens": 0}}',
        b'{"usage": {"input_tokens": 1, "output_tokens": 1}, "note": "x"}',
        b'{"usage": {"input_tokens": 1, "output_tokens": 1, "input_tokens": 2}}',  # a duplicate key
        b'{"usage": [1, 2]}',
        b'{"usage": {"input_tokens": NaN, "output_tokens": 0}}',
        b"\xff\xfe",
        b"not json",
        b'{"usage": {"input_tokens": 1, "output_tokens": 1, "pad": "' + b"x" * MAX_LINE_BYTES + b'"}}',
    ],
)
def test_anything_else_is_not_a_usage_line(line: bytes) -> None:
    assert usage_of(line) is None


@settings(max_examples=examples(300))
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_read_as_a_usage_line_or_none_and_never_raise(line: bytes) -> None:
    found = usage_of(line)
    assert found is None or found.tokens >= 0


@settings(max_examples=examples(100))
@given(st.integers(0, 2**40), st.integers(0, 2**40), st.dictionaries(st.sampled_from(["cost_usd", "model"]), st.text()))
def test_a_valid_report_reads_back_as_it_was_written(given_in: int, given_out: int, extra: dict[str, Any]) -> None:
    usage = {"input_tokens": given_in, "output_tokens": given_out, **extra}
    found = usage_of(json.dumps({"usage": usage}).encode())
    assert found is not None and (found.tokens, found.fields) == (given_in + given_out, usage)


def test_the_reader_keeps_the_last_usage_and_waits_for_a_whole_line(tmp_path: Path) -> None:
    path = tmp_path / "progress"
    path.write_bytes(b'{"note": "a"}\n{"usage": {"input_tokens": 1, "output_tokens": 2}}\n{"usage": {"input_')
    reader = UsageReader(path)
    first = reader.look()
    assert first is not None and first.tokens == 3
    with path.open("ab") as more:
        more.write(b'tokens": 10, "output_tokens": 5}}\n{}\n')
    later = reader.look()
    assert later is not None and later.tokens == 15
    with path.open("ab") as more:
        more.write(b'{"usage": {"input_tokens": 20, "output_tokens": 5}}')  # no newline: the unit ended
    last = reader.finish()
    assert last is not None and last.tokens == 25


def test_the_reader_ignores_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert UsageReader(fifo).finish() is None  # never blocks on a FIFO the unit put there
    (tmp_path / "target").write_text('{"usage": {"input_tokens": 1, "output_tokens": 1}}\n')
    (tmp_path / "link").symlink_to(tmp_path / "target")
    assert UsageReader(tmp_path / "link").finish() is None
    assert UsageReader(tmp_path / "gone").finish() is None


def test_an_overlong_line_is_invalid_even_when_it_ends_later(tmp_path: Path) -> None:
    path = tmp_path / "progress"
    path.write_bytes(b'{"usage": {"input_tokens": 1, "output_tokens": 1}, "x": "' + b"x" * (2 * MAX_LINE_BYTES))
    reader = UsageReader(path)
    reader.look()
    with path.open("ab") as more:
        more.write(b'"}\n')
    assert reader.finish() is None


class Accounts:
    """Runs as (parent, spent, raised, limits)."""

    def __init__(self, runs: Mapping[str, tuple[str | None, int, int, dict[str, Any]]]) -> None:
        self.runs = runs

    def token_account(self, run_id: str) -> tuple[str | None, int, int] | None:
        parent, spent, raised, _ = self.runs[run_id]
        return parent, spent, raised

    def run_limits(self, run_id: str) -> Mapping[str, Any]:
        return self.runs[run_id][3]


def test_the_smallest_budget_left_over_the_unit_its_step_and_every_ancestor() -> None:
    accounts = Accounts(
        {
            "root": (None, 900, 100, {"maxTokens": 1000}),  # 200 left of 1,100
            "mid": ("root", 50, 0, {}),  # no budget of its own
            "leaf": ("mid", 10, 0, {"maxTokens": 500}),  # 490 left
        }
    )
    assert remaining(accounts, "leaf", None, 0) == Left(200, "root", 1100)
    assert remaining(accounts, "leaf", 150, 30) == Left(120, "unit", 150)
    assert remaining(Accounts({"solo": (None, 0, 0, {})}), "solo", None, 0) is None


def test_the_reader_follows_a_replaced_file_and_keeps_what_the_old_one_said_last(tmp_path: Path) -> None:
    path = tmp_path / "progress"
    path.write_bytes(b'{"usage": {"input_tokens": 1, "output_tokens": 1}}\n')
    reader = UsageReader(path)
    assert (found := reader.look()) is not None and found.tokens == 2
    with path.open("ab") as more:  # written, but never looked at before the file is replaced
        more.write(b'{"usage": {"input_tokens": 5, "output_tokens": 5}}\n' + b"{}\n" * (1 << 20))
    path.rename(tmp_path / "old")
    path.write_bytes(b'{"note": "fresh"}\n')
    assert (found := reader.look()) is not None and found.tokens == 10
    with path.open("wb") as truncated:
        truncated.write(b'{"usage": {"input_tokens": 7, "output_tokens": 0}}\n')
    assert (found := reader.finish()) is not None and found.tokens == 7
