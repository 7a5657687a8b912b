"""Notifications (operations.md D4): a root run's pending notifications sent to its notifier, and
what `logs --notifications` and `status` show of them.

The journal queues a notification in the transaction of the event it tells of (akm_run.store), so
one that a crash kept from being sent is sent by the next drive of the run, under the same
dispatch id (`AKM_DISPATCH_ID`), which lets a receiver drop a repeat. Delivery is at least once. A
notifier runs bounded by its timeout, its outcome decided by its process's exit (akm_run.processes);
one that fails or hangs is journaled (`notify.failed`) and never changes the run's status or the
command's exit code."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from akm_run import children, exitcodes, outcomes, processes, units, wording
from akm_run.activity import Beat
from akm_run.console import emit, iso
from akm_run.hints import Hints
from akm_run.locks import pid_alive
from akm_run.outbox import HOST_EVENTS
from akm_run.rows import NotificationRow, RunRow
from akm_run.store import Store
from akm_run.trust import signed_by

HOST_TIMEOUT_S = 30.0  # the host's notifier (`--notify-cmd`): the default timeout of a `notify` section
TAIL_BYTES = 4096  # of a notifier's stderr, kept


@dataclass(frozen=True, slots=True)
class Notifier:
    """One command a notification is sent to: the host's (`--notify-cmd`) or the plan's `notify`."""

    target: dict[str, Any]  # a shell or script target
    on: frozenset[str]
    env: list[dict[str, Any]]
    timeout_s: float = HOST_TIMEOUT_S
    retry: dict[str, Any] | None = None
    host: bool = False  # the host's own command: it sees the runtime's environment


def notifiers(run: RunRow) -> list[Notifier]:
    """The notifiers of a root run: the host's, then its plan's."""
    found = []
    if run.notify_cmd:
        found.append(Notifier({"kind": "shell", "command": run.notify_cmd}, frozenset(HOST_EVENTS), [], host=True))
    section = json.loads(run.plan_json).get("notify")
    if section is not None:
        timeout = section.get("timeoutMs", HOST_TIMEOUT_S * 1000) / 1000
        found.append(
            Notifier(section["target"], frozenset(section["on"]), section.get("env", []), timeout, section.get("retry"))
        )
    return found


def remember(store: Store, run_id: str, given: str | None, known: str | None = None) -> None:
    """Remember the host's notifier on the run (like --agent-cmd): the command line's, else
    $AKM_RUN_NOTIFY_CMD; `known` is the one the run has."""
    command = given or os.environ.get("AKM_RUN_NOTIFY_CMD") or None
    if command is not None and command != known:
        store.remember_notifier(run_id, command)


# One sender at a time per root run in a process (a drive and its stall thread), so a run's
# notifications leave in the order of their events: a run's `failed` never overtakes its `stalled`.
_SENDERS = tuple(threading.Lock() for _ in range(64))


def deliver(store: Store, run_id: str, hints: Hints, environ: Mapping[str, str] | None = None) -> None:
    """Send the root run's pending notifications in event order, each bounded by its timeout;
    never raises."""
    with _SENDERS[hash(run_id) % len(_SENDERS)]:
        _deliver(store, run_id, hints, environ)


def _deliver(store: Store, run_id: str, hints: Hints, environ: Mapping[str, str] | None) -> None:
    try:
        run = store.run(run_id)
        if run is None or run.parent_run_id is not None:
            return
        chosen = notifiers(run)
        for row in store.notifications(run_id, pending=True) if chosen else []:
            if not _takeable(row) or not store.claim_notification(run_id, row.seq, row.attempts, claimer()):
                continue  # another drive or worker is sending it
            context = notification_context(store, run, row, hints)
            ended: Sent = (True, 0, None, None)
            retries = 0
            for notifier in (n for n in chosen if row.event in n.on):
                result, tries = _with_retries(notifier, run, context, row.dispatch_id, environ)
                ended, retries = (result if not result[0] else ended), retries + tries - 1
            sent, code, reason, tail = ended
            store.record_notification(
                run_id, row.seq, sent=sent, exit_code=code, reason=reason, stderr_tail=tail, retries=retries
            )
    except Exception:  # noqa: BLE001 - a notification never changes how a drive ends
        return


def claimer() -> str:
    """Who claims a notification: this host and process, read at the claim (a forked process is
    another claimer)."""
    return f"{socket.gethostname()}:{os.getpid()}"


STALE_CLAIM_S = 600.0  # a claim by a process on another host, which cannot be checked, is taken after this


def _takeable(row: NotificationRow) -> bool:
    """Whether a notification not yet delivered is this process's to send: pending, or taken by a
    sender that died (a process of this host that is gone, or a claim on another host gone stale)."""
    if row.status == "pending" or row.claimed_by is None:
        return True
    host, _, pid = row.claimed_by.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        return int(pid) != os.getpid() and not pid_alive(int(pid))
    return time.time() - (row.claimed_at or 0.0) > STALE_CLAIM_S


def stalled_soon(store: Store, beats: list[Beat], hints: Hints, environ: Mapping[str, str] | None = None) -> None:
    """After a sample that journaled a unit's first silence: its root run's `stalled` notification,
    sent now on a thread of its own (the run goes on; the sample is not held up by the notifier)."""
    roots = {store.root_run(b.run_id) for b in beats if b.event == "unit.silent" and b.data.get("stretch") == 1}
    for root in roots:
        threading.Thread(target=deliver, args=(store, root, hints, environ), name="akm-notify", daemon=True).start()


Sent = tuple[bool, int | None, str | None, str | None]  # sent, exit code, why not, stderr tail


def _with_retries(
    notifier: Notifier, run: RunRow, context: dict[str, Any], dispatch_id: str, environ: Mapping[str, str] | None
) -> tuple[Sent, int]:
    """How sending ended, retried as the notifier's `retry` says, and how many times it was tried."""
    retry = notifier.retry or {"max": 0, "on": []}
    tried = 0
    while True:
        tried += 1
        result = send(notifier, run, context, dispatch_id, environ)
        if result[0] or result[2] not in retry["on"] or tried > retry["max"]:
            return result, tried
        time.sleep(retry.get("backoffMs", 0) / 1000)


def send(
    notifier: Notifier, run: RunRow, context: dict[str, Any], dispatch_id: str, environ: Mapping[str, str] | None
) -> Sent:
    """Run one notifier with the context on stdin and in `AKM_CONTEXT`, bounded by its timeout."""
    text = json.dumps(context, ensure_ascii=False, sort_keys=True)
    environ = os.environ if environ is None else environ
    with tempfile.TemporaryDirectory(prefix="akm-notify-") as directory:
        path = Path(directory) / "context.json"
        path.write_text(text, encoding="utf-8")
        path.chmod(0o600)
        try:
            env, secrets = _environment(notifier, run, dispatch_id, environ)
        except units.UnitFailure as failure:
            return False, None, failure.reason, failure.message
        env.update({"AKM_CONTEXT": str(path), "AKM_DISPATCH_ID": dispatch_id, "AKM_RUN_ID": run.id})
        argv = ["/bin/sh", "-c", notifier.target.get("command", "")]
        if notifier.target["kind"] == "script":
            script = Path(directory) / "notify"
            units.write_private(script, notifier.target["text"], 0o700)  # as a unit's script is written
            argv = [str(script)]
        return _run(argv, env, path, notifier.timeout_s, _cwd(run), secrets)


def _environment(
    notifier: Notifier, run: RunRow, dispatch_id: str, environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The host's notifier gets the runtime's environment; the plan's, a unit's (its `env` only)."""
    if notifier.host:
        return dict(environ), []
    context = {"runId": run.id, "stepId": "notify", "unitId": "notify", "dispatchId": dispatch_id, "attempt": 1}
    return units.environment(units.Unit(notifier.target, context, notifier.env), environ)


def _cwd(run: RunRow) -> str:
    return run.workdir if run.workdir and Path(run.workdir).is_dir() else "."


def _run(argv: list[str], env: dict[str, str], context: Path, timeout_s: float, cwd: str, secrets: list[str]) -> Sent:
    """How a notifier's process ended, decided by its exit (never by its pipe's end: a background
    process it leaves holding stderr open cannot hold the drive), bounded by its timeout; the tail
    of its stderr, read as it comes."""
    deadline = time.monotonic() + timeout_s
    with context.open("rb") as stdin:
        try:
            with units.SPAWNING:  # never forked while a unit's script is open for writing
                process = subprocess.Popen(
                    argv,
                    stdin=stdin,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                )
        except OSError as error:
            return False, None, "spawn_error", str(error.strerror or error)
    streams = processes.Streams(process, TAIL_BYTES + max((len(s.encode()) for s in secrets), default=0))
    try:
        stopped = processes.wait_until(process, streams, deadline)
    finally:
        streams.close()
    tail = outcomes.last(outcomes.clean(bytes(streams.stderr), secrets), TAIL_BYTES) or None
    if stopped is not None:
        return False, None, "timeout", tail
    if process.returncode != 0:
        return False, process.returncode, "exit", tail
    return True, 0, None, tail


def notification_context(store: Store, run: RunRow, row: NotificationRow, hints: Hints) -> dict[str, Any]:
    """What a notifier is told, secret-free: `{event, runId, ref, title, status, planHash, at,
    step?, notes?, commands?, chain?, signedBy?, exported?}`."""
    found = store.event_at(row.seq)
    at = found[4] if found is not None else row.created_at
    context: dict[str, Any] = {
        "event": row.event,
        "runId": run.id,
        "ref": run.ref,
        "title": run.title,
        "status": run.status,
        "planHash": run.plan_hash,
        "at": iso(at),
        "dispatchId": row.dispatch_id,
    }
    signer = signed_by(store, run)
    if signer is not None:
        context["signedBy"] = signer.document()
    if row.event == "blocked":
        _blocked(store, run, hints, context)
    elif row.event == "failed" and run.failure is not None:
        failure = run.failure
        context["step"] = {k: failure[k] for k in ("stepId", "reason", "message") if failure.get(k) is not None}
        context["commands"] = [hints("status", run.id), hints("logs", run.id)]
    elif row.event == "stalled" and found is not None:
        event_run, step_id, _, data, _ = found
        context["step"] = {"stepId": step_id, "reason": "silent"}
        context["commands"] = [hints("logs", event_run, step_id or ""), hints("pause", event_run, step_id or "")]
        context["silentMs"] = data.get("silentMs")
    elif row.event == "completed":
        context["exported"] = run.exported
    return context


def _blocked(store: Store, run: RunRow, hints: Hints, context: dict[str, Any]) -> None:
    """The blocked step, its notes, the commands that clear it and the chain to the deepest blocked run."""
    chain, current = [], run
    while True:
        step = next((s for s in store.steps(current.id) if s.status == "blocked"), None)
        if step is None:
            break
        chain.append({"runId": current.id, "ref": current.ref, "stepId": step.step_id})
        child = next(
            (
                store.run(u.child_run_id)
                for u in store.child_units(current.id)
                if u.step_id == step.step_id and u.child_run_id and u.failure_reason == "child_workflow_blocked"
            ),
            None,
        )
        if child is None or child.status != "blocked" or len(chain) > 16:
            break
        current = child
    if chain:
        context["step"] = {"stepId": chain[0]["stepId"], "reason": "blocked"}
    if len(chain) > 1:
        context["chain"] = chain
    if run.notes:
        context["notes"] = run.notes
    context["commands"] = children.clearing(store, hints, run)[1]


# -- what `logs --notifications` and `status` show -------------------------------------------------------


def show(store: Store, run: RunRow, fmt: str) -> int:
    """`akm-run logs RUN --notifications`: the run's deliveries, as text or JSON; exit 0."""
    listed = document(store, run)
    emit(listed, text(listed), fmt)
    return exitcodes.COMPLETED


def document(store: Store, run: RunRow) -> dict[str, Any]:
    """`{runId, ref, notifications: [{seq, event, dispatchId, status, attempts, exitCode?, reason?, stderrTail?}]}`."""
    entries = []
    for row in store.notifications(run.id):
        entry: dict[str, Any] = {
            "seq": row.seq,
            "event": row.event,
            "dispatchId": row.dispatch_id,
            "status": row.status,
            "attempts": row.attempts,
        }
        for key, value in (("exitCode", row.exit_code), ("reason", row.reason), ("stderrTail", row.stderr_tail)):
            if value is not None:
                entry[key] = value
        entries.append(entry)
    return {"runId": run.id, "ref": run.ref, "notifications": entries}


def text(document: dict[str, Any]) -> str:
    lines = [f"run {document['runId']} ({document['ref']})  notifications"]
    if not document["notifications"]:
        lines.append("no notifications")
    for entry in document["notifications"]:
        how = f"  {_exit(entry['exitCode'])}" if "exitCode" in entry else ""
        why = f"  {entry['reason']}" if "reason" in entry and "exitCode" not in entry else ""
        lines.append(
            f"  {entry['event']:<9} {entry['status']:<7}{how}{why}  attempts {entry['attempts']}  "
            f"dispatch {entry['dispatchId']}  (event {entry['seq']})"
        )
        if "stderrTail" in entry:
            lines += [f"      | {line}" for line in entry["stderrTail"].splitlines()]
    return "\n".join(lines) + "\n"


def _exit(code: int) -> str:
    """How a notifier's process ended, as a unit's is said: `exit 7`, or `killed by signal 9`."""
    return f"killed by signal {-code}" if code < 0 else f"exit {code}"


def failed_line(store: Store, run: RunRow, hints: Hints) -> str | None:
    """`notification failed: blocked → exit 7 (akm-run logs RUN --notifications)` for the latest
    notification of the run, when it failed."""
    rows = store.notifications(run.id)
    if not rows or rows[-1].status != "failed":
        return None
    last = rows[-1]
    how = _exit(last.exit_code) if last.exit_code is not None else (last.reason or "failed")
    return wording.notification_failed(event=last.event, how=how, command=hints("logs", run.id, "--notifications"))


def summary(store: Store, run: RunRow) -> dict[str, Any] | None:
    """The latest notification's failure for `status --format json`, or None."""
    rows = store.notifications(run.id)
    if not rows or rows[-1].status != "failed":
        return None
    last = rows[-1]
    found: dict[str, Any] = {"event": last.event, "seq": last.seq, "dispatchId": last.dispatch_id}
    if last.exit_code is not None:
        found["exitCode"] = last.exit_code
    if last.reason is not None:
        found["reason"] = last.reason
    return found
