"""What progress draws, from the calls a driver makes: the live line and the plain lines."""

from __future__ import annotations

import io
import re

from hypothesis import given
from hypothesis import strategies as st

from akm_run.pgstore import PostgresStore
from akm_run.progress import FromJournal, Live, Plain, Progress, covered

CHILD = "workflows/leaf (r2): "


def drawn(stream: io.StringIO) -> list[str]:
    """Each state of the live line, in the order drawn."""
    return [line for line in stream.getvalue().split("\r\033[K") if line]


def test_the_live_line_shows_the_parent_again_once_its_step_that_drove_a_child_run_ends() -> None:
    stream = io.StringIO()
    live = Live(stream)
    live.step_started("", "child", 2, 5)
    live.unit_started()
    live.step_started(CHILD, "double", 0, 1)
    live.step_ended(CHILD, "double", "completed", 0.1)
    live.unit_ended()
    live.step_ended("", "child", "completed", 0.2)
    assert drawn(stream)[-3:] == [
        f"steps 1/1 done, at {CHILD}double, 1 unit in flight",
        f"steps 1/1 done, at {CHILD}double, 0 units in flight",
        "steps 3/5 done, at child, 0 units in flight",
    ]


def test_the_live_line_shows_the_newest_progress_frame_while_units_are_in_flight() -> None:
    stream = io.StringIO()
    live = Live(stream)
    live.step_started("", "index", 0, 2)
    live.unit_started()
    live.activity({"note": "Indexing", "progress": 240, "total": 1000})
    live.unit_ended()
    assert drawn(stream)[-2:] == [
        'steps 0/2 done, at index, 1 unit in flight, "Indexing" 240/1000',
        "steps 0/2 done, at index, 0 units in flight",
    ]


def test_the_live_line_counts_the_members_of_a_parallel_block_running() -> None:
    stream = io.StringIO()
    live = Live(stream)
    live.step_started("", "checks", 3, 8)
    live.members("", 2, 3)
    live.unit_started(5)
    live.step_ended("", "checks", "completed", 0.5)
    assert drawn(stream)[-2:] == [
        "steps 3/8 done, at checks (2 of 3 members running, 5 units in flight)",
        "steps 4/8 done, at checks, 5 units in flight",
    ]


def test_the_live_line_stays_within_the_terminal_width() -> None:
    stream = io.StringIO()  # not a terminal: 80 columns
    live = Live(stream)
    live.step_started("workflows/a-rather-long-name/of-a-child-workflow (20261201T101218-abcdef12): ", "x", 0, 1)
    live.unit_started(200)
    assert drawn(stream) and all(len(line) == 79 for line in drawn(stream))


def test_no_line_carries_a_control_character() -> None:
    for kind in (Plain, Live):
        progress: Progress = kind(stream := io.StringIO())
        progress.step_started("evil\033]0;title\a (r\n1): ", "step\033[2J", 0, 1)
        progress.step_ended("evil\033]0;title\a (r\n1): ", "step\033[2J", "completed", 0.0)
        text = stream.getvalue().replace("\r\033[K", "")
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text), text
        assert "\\x1b[2J" in text


class Recorded(Progress):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[object, ...]] = []

    def step_started(self, where: str, step_id: str, done: int, total: int) -> None:
        self.calls.append(("started", where, step_id, done, total))

    def step_ended(self, where: str, step_id: str, status: str, seconds: float) -> None:
        self.calls.append(("ended", where, step_id, status))

    def _units_changed(self) -> None:
        self.calls.append(("units", self.in_flight))


PLAN = {
    "irVersion": 1,
    "ref": "workflows/w",
    "title": "w",
    "limits": {},
    "steps": [{"stepId": "a", "index": 0}, {"stepId": "b", "index": 1}],
}


def test_a_follower_that_comes_later_draws_where_the_run_is_and_a_step_started_again_once(database_url: str) -> None:
    """A drive died in step b with its attempt running (the pool re-attaches to it): a follower that
    comes now draws b and one unit in flight; the recovered drive's start of b draws nothing more."""
    store = PostgresStore(database_url)
    store.publish_run("r", PLAN, "sha256:x", {})
    store.start_step("r", "a", 0)
    store.begin_attempt("r", "u1", "a", None, "h", "d-1", new_unit=True)
    store.complete_attempt("r", "u1", "a", 1, None, None)
    store.complete_step("r", "a", None)
    store.start_step("r", "b", 1)
    store.begin_attempt("r", "u2", "b", None, "h", "d-2", new_unit=True)
    shown = FromJournal(recorded := Recorded(), store.run)
    shown.catch_up(store.progress_events("r", 0))
    assert recorded.calls == [("started", "", "b", 1, 2), ("units", 1)]
    store.start_step("r", "b", 1)  # the recovered drive
    store.fail_unit("r", "u3", "b", None, "input_unresolved", "never dispatched")
    store.complete_attempt("r", "u2", "b", 1, None, None)
    store.complete_step("r", "b", None)
    shown.show(store.progress_events("r", shown.after))
    assert recorded.calls[2:] == [("units", 0), ("ended", "", "b", "completed")]
    store.close()


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), max_size=12))
def test_a_steps_attempts_running_at_once_count_once(spans: list[tuple[int, int]]) -> None:
    """The duration of a step's attempts is the time at least one of them ran: counted per unit of
    time, it is the number of instants some span covers."""
    closed = [(start, start + length) for start, length in spans]
    instants = {t for start, end in closed for t in range(start, end)}
    assert covered([(float(a), float(b)) for a, b in closed]) == len(instants)
