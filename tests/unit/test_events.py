"""akm_run.events: the docs' event catalog is the runtime's, kind for kind and key for key; kind
globs; how an event is written as JSON and as text."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akm_run.activity import Channel, Watch
from akm_run.events import BadGlob, Lanes, Polling, document, follow, kind_filter, stamp, text_line
from akm_run.migrations import EVENT_KINDS
from akm_run.rows import AttemptFailure, Event
from akm_run.signing import Signer
from akm_run.sqlitestore import SQLiteStore
from akm_run.trust import Signature
from helpers import REPO

PLAN = {"irVersion": 1, "ref": "workflows/w", "title": "w", "limits": {}}
PLAN["steps"] = [{"stepId": "a", "index": 0}, {"stepId": "b", "index": 1}]


def catalog() -> dict[str, set[str]]:
    """docs/runtime.md's event kinds table: each kind's `data` keys (optional ones without their `?`)."""
    text = (REPO / "docs" / "runtime.md").read_text(encoding="utf-8")
    table = text.split("### The event kinds", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([a-z.]+)` \| [^|]* \| (.*) \|$", table, re.M)
    assert len(rows) == len({kind for kind, _ in rows}), "a kind listed twice"
    # The keys are the cell's backticked names, not those inside a value's braces: `{stepId, reason}`.
    return {kind: set(re.findall(r"`([A-Za-z]+)\??(?:: null)?`", cell)) for kind, cell in rows}


def test_the_docs_catalog_lists_exactly_the_event_kinds_in_their_order() -> None:
    text = (REPO / "docs" / "runtime.md").read_text(encoding="utf-8")
    table = text.split("### The event kinds", 1)[1].split("\n#", 1)[0]
    assert re.findall(r"^\| `([a-z.]+)` \|", table, re.M) == list(EVENT_KINDS)


def written(tmp_path: Path) -> dict[str, set[str]]:
    """The `data` keys each kind has when every journal transition runs once (on a real SQLite store)."""
    store = SQLiteStore(tmp_path / "state")
    signature = Signature(b"{}", b"sig", Signer("ada", "SHA256:x"), "ada ssh-ed25519 AAAA")
    store.publish_run("r1", PLAN, "sha256:x", {}, signature=signature, preflight_skipped=True)
    store.publish_run("c1", PLAN, "sha256:x", {}, parent_run_id="r1", parent_unit_id="a:solo", invocation_key="k")
    store.start_step("r1", "a", 0)
    attempt = store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=True)
    store.fail_attempt("r1", "a:solo", "a", attempt, AttemptFailure("exit", "m", 1, final=False))
    store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=False)
    store.abort_attempt("r1", "a:solo", "a", 2, "aborted", None)
    store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=False)
    store.interrupt_attempt("r1", "a:solo", "a", 3)
    store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=False)
    store.complete_attempt("r1", "a:solo", "a", 4, 1, None, {"input_tokens": 1, "output_tokens": 2})
    store.keep_worktree("r1", "a:solo", "a", 4, "/state/worktrees/r1/a:solo~a4", 2)
    store.remove_worktree("r1", "a:solo", "a", 4, "/state/worktrees/r1/a:solo~a4", by="prune")
    store.exceed_budget("r1", "a", "a:solo", budget="r1")
    store.exceed_budget("r1", "a", "a:solo", attempt=4)
    store.unmetered("r1", "a", "a:solo")
    store.raise_tokens("r1", 10, "ops")
    store.fail_unit("r1", "b:solo", "b", None, "input_unresolved", "m")
    store.complete_step("r1", "a", 1)
    store.fail_step("r1", "b", "units_failed", "m")
    store.skip_by_operator("r1", "b", None, "skipped by al", "al", None)
    store.retry_steps("r1", "a", ["a"], ["a:solo"], "al")
    store.pause("r1", [], {"by": "al", "now": False})
    store.pause("r1", ["b"], {"by": "al", "now": True})
    store.unpause("r1", [], "al")
    store.unpause("r1", ["b"], "al")
    store.skip_step("c1", "a", "route")
    store.reject_gate("c1", "b", 0, "too short")
    store.block_step("c1", "b", "why", "gate_rejected")
    store.block_run("c1", "why")
    store.reopen_run("c1")
    store.block_run("c1", "why")
    store.unblock_run("c1")
    store.decide_step("c1", "a", {"approved": True}, "al", approved=True)
    store.reject_step("c1", "b", {"approved": False}, "rejected by bo", "bo")
    store.fail_run("c1", {"stepId": "b", "reason": "approval_rejected", "message": "m"}, clear_notes=True)
    store.event("r1", "preflight.failed", findings=[])
    _silence(store, tmp_path)
    store.record_notification("r1", 1, sent=True, exit_code=0, reason=None, stderr_tail=None)
    store.record_notification("r1", 2, sent=False, exit_code=7, reason="exit", stderr_tail="no")
    store.complete_run("r1", {})
    store.abandon_run("c1", {"stepId": None, "reason": "abandoned", "message": "m"})
    keys: dict[str, set[str]] = {}
    for run_id in ("r1", "c1"):
        for kind, _, _, data in store.events(run_id):
            keys.setdefault(kind, set()).update(data)
    store.close()
    return keys


def _silence(store: SQLiteStore, tmp_path: Path) -> None:
    """An attempt's silent stretch and its end, as a drive's board samples them."""
    context = {"runId": "r1", "unitId": "a:solo", "stepId": "a", "attempt": 4}
    watch = Watch(context, Channel(tmp_path / "progress"), stall_after_ms=1000)
    watch.last -= 2  # two seconds without activity
    silent = watch.beat(time.monotonic())
    watch.active()
    active = watch.beat(time.monotonic())
    watch.close()
    assert silent is not None and active is not None
    store.record_activity([silent, active])


def test_every_transition_writes_only_the_data_keys_the_catalog_lists(tmp_path: Path) -> None:
    keys, documented = written(tmp_path), catalog()
    assert set(keys) == set(EVENT_KINDS)  # every kind was written above
    assert {kind: found - documented[kind] for kind, found in keys.items() if found - documented[kind]} == {}


@given(st.text(max_size=20))
def test_any_kind_glob_is_refused_as_a_glob_or_selects_kinds(glob: str) -> None:
    try:
        wanted = kind_filter([glob])
    except BadGlob as error:
        assert repr(glob) in str(error)
        return
    assert any(wanted(kind) for kind in EVENT_KINDS)


@pytest.mark.parametrize(
    ("globs", "kinds"),
    [
        (["step.*"], [k for k in EVENT_KINDS if k.startswith("step.")]),
        (["run.[bc]*", "gate.rejected"], ["run.completed", "run.blocked", "gate.rejected"]),
        ([], list(EVENT_KINDS)),
    ],
)
def test_globs_select_kinds(globs: list[str], kinds: list[str]) -> None:
    wanted = kind_filter(globs)
    assert [k for k in EVENT_KINDS if wanted(k)] == kinds


def _event(**fields: Any) -> Event:
    base: dict[str, Any] = {"seq": 7, "run_id": "c", "kind": "unit.failed", "step_id": "s", "unit_id": "s:solo"}
    base |= {"data": {"attempt": 2, "reason": "exit", "final": True}, "at": 1_795_000_000.25}
    return Event(**(base | fields))


class NoStore:
    """A store that knows two runs: `c`, a child of `p`."""

    def run(self, run_id: str) -> Any:
        from akm_run.rows import RunRow

        parent = "p" if run_id == "c" else None
        ref = f"workflows/{run_id}"
        plain = (None, None, None, None, None, 0, 0.0, 0.0, None, None)
        return RunRow(run_id, ref, run_id, "", "{}", "{}", "active", 0, parent, *plain)


def test_an_event_as_json_carries_its_lane_and_its_attempt() -> None:
    lanes = Lanes(NoStore())  # type: ignore[arg-type]
    assert document(_event(), lanes) == {
        "seq": 7,
        "at": "2026-11-18T11:06:40.250Z",
        "runId": "c",
        "path": ["p", "c"],
        "kind": "unit.failed",
        "stepId": "s",
        "unitId": "s:solo",
        "attempt": 2,
        "data": {"attempt": 2, "reason": "exit", "final": True},
    }
    assert "stepId" not in document(_event(step_id=None, unit_id=None, data={}), lanes)


def test_an_event_as_text_names_a_child_run_and_escapes_what_it_quotes() -> None:
    lanes = Lanes(NoStore())  # type: ignore[arg-type]
    line = text_line(_event(data={"reason": "exit\x1b[2J"}), lanes, "p", 1_795_000_000.0)
    assert line == "11:06:40.250  +0.250s  workflows/c (c): unit.failed  s s:solo (exit\\x1b[2J)"
    assert text_line(_event(run_id="p"), lanes, "p", None).startswith(
        "11:06:40.250  ?  unit.failed  s s:solo attempt 2"
    )
    assert stamp(0.999) == "1970-01-01T00:00:00.999Z"


def test_a_silence_and_a_notification_as_text_say_how_long_and_which_event() -> None:
    lanes = Lanes(NoStore())  # type: ignore[arg-type]
    silent = _event(run_id="p", kind="unit.silent", data={"attempt": 1, "silentMs": 301_250, "stallAfterMs": 300_000})
    assert text_line(silent, lanes, "p", None).endswith("unit.silent  s s:solo attempt 1 silent 301.2s")
    told = _event(run_id="p", kind="notify.failed", data={"seq": 12, "exitCode": 7, "reason": "exit"})
    assert text_line(told, lanes, "p", None).endswith("notify.failed  s s:solo of event 12 exit 7 (exit)")


class Journal:
    """A store a follower reads (unit test of akm_run.events.follow): `script` yields, per poll, the
    events that committed since and whether a driver holds the run; the run's status is `status`."""

    def __init__(self, history: list[str], script: list[tuple[list[str], bool]], status: str = "active") -> None:
        self.events = [_event(seq=i + 1, run_id="r", kind=k, data={}) for i, k in enumerate(history)]
        self.script, self.status, self.polls = script, status, 0
        self.paused: str | None = None

    def timeline(self, run_id: str, after: int, *, children: bool, limit: int) -> list[Event]:
        return [e for e in self.events if e.seq > after][:limit]

    def run(self, run_id: str) -> Any:
        row = NoStore().run("r")
        row.status = self.status
        return row

    def driven(self, run_id: str) -> bool:
        kinds, held = self.script[min(self.polls, len(self.script) - 1)]
        self.polls += 1
        for kind in kinds:
            self.events.append(_event(seq=len(self.events) + 1, run_id="r", kind=kind, data={}))
            if kind in ("run.completed", "run.failed", "run.blocked"):
                self.status = kind.removeprefix("run.")
            elif kind in ("run.paused", "run.unpaused"):
                self.paused = '{"by": "al"}' if kind == "run.paused" else None
        return held

    def pauses(self, run_id: str) -> tuple[str | None, dict[str, str]]:
        return self.paused, {}


def followed(journal: Journal, pending: bool = False) -> tuple[int, list[str]]:
    shown: list[str] = []
    polling = Polling(interval_s=0.0, idle_s=0.0, pending=lambda run_id: pending and journal.polls < 5)
    code = follow(journal, "r", False, lambda e: shown.append(e.kind), threading.Event(), 0, polling)  # type: ignore[arg-type]
    return code, shown


def test_a_follower_exits_as_the_run_settles_or_its_drive_ends() -> None:
    assert followed(Journal(["run.published", "run.failed"], [([], False)], status="failed")) == (
        1,
        ["run.published", "run.failed"],
    )
    code, shown = followed(Journal(["run.published"], [([], True), (["step.started", "run.blocked"], True)]))
    assert (code, shown) == (3, ["run.published", "step.started", "run.blocked"])
    assert followed(Journal(["run.published"], [([], True), (["unit.aborted"], False)]))[0] == 130
    # A drive that a pause ended leaves the run active, and `run` exits 3 for it: so does the follower.
    assert followed(Journal(["run.published"], [([], True), (["run.paused"], False)]))[0] == 3
    assert followed(Journal(["run.published"], [([], True), (["run.paused", "run.unpaused"], False)]))[0] == 130
    # The drive's last events and its lock's release fall between two polls: its end is read.
    assert followed(Journal(["run.published"], [([], True), (["run.completed"], False)]))[0] == 0
    assert followed(Journal(["run.published"], [([], True), ([], False), (["run.completed"], True)]), True)[0] == 0


def test_a_preflight_failure_ends_a_follow_with_5_but_not_one_from_an_earlier_drive() -> None:
    journal = Journal(["run.published", "preflight.failed"], [([], False), (["preflight.failed"], False)])
    assert followed(journal) == (5, ["run.published", "preflight.failed", "preflight.failed"])
