"""What `akm-run` prints: run results, status (text and JSON, with the children tree), lists."""

from __future__ import annotations

import json
from typing import Any

from akm_run import budgets, children, kept, lanes, notify, operations, running, wording
from akm_run.console import iso
from akm_run.core import DriveResult as Result
from akm_run.hints import Hints
from akm_run.rows import AttemptRow, RunRow
from akm_run.store import Store
from akm_run.trust import signed_by

ABANDONED = operations.ABANDONED["reason"]
STEP_GLYPHS = {"completed": "✓", "failed": "✗", "blocked": "⚠", "running": "→", "pending": "·", "skipped": "↷"}
RUN_GLYPHS = {"completed": "✓", "failed": "✗", "blocked": "⚠", "active": "→"}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# -- `akm-run run` ------------------------------------------------------------------------------------


def result_document(result: Result, run: RunRow) -> dict[str, Any]:
    document: dict[str, Any] = {
        "runId": run.id,
        "ref": run.ref,
        "status": "active" if result.status in ("aborted", "paused") else result.status,
        "planHash": run.plan_hash,
    }
    if result.status == "completed":
        document["exported"] = result.exported
    for key in ("failure", "blocked", "error", "paused"):
        if getattr(result, key) is not None:
            document[key] = getattr(result, key)
    return document


def result_text(result: Result, run: RunRow, hints: Hints) -> str:
    head = f"run {run.id} ({run.ref})"
    if result.error is not None:
        lines = [f"{head}: error {result.error['code']}: {result.error['message']}"]
    elif result.status == "completed":
        lines = [f"{head} completed", f"exported: {_json(result.exported)}"]
    elif result.status == "failed" and (result.failure or {}).get("reason") == ABANDONED:
        lines = [f"{head} was abandoned: it is never driven again (publish its plan as a new run)"]
    elif result.status == "failed":
        failure = result.failure or {}
        where = f" at step {failure['stepId']}" if failure.get("stepId") else ""
        lines = [
            f"{head} failed{where}: {failure.get('reason')}: {failure.get('message')}",
            f"see `{hints('status', run.id)}`",
        ]
    elif result.status == "blocked":
        blocked = result.blocked or {}
        where = f" at step {blocked['stepId']}" if blocked.get("stepId") else ""
        lines = [f"{head} blocked{where}", *("  " + line for line in str(blocked.get("notes", "")).splitlines())]
    elif result.status == "paused":
        lines = [f"{head} {_paused_text(result.paused or {}, hints, run.id)}"]
    else:
        lines = [f"{head} is {result.status}"]
    return "\n".join(lines) + "\n"


def _paused_text(held: dict[str, Any], hints: Hints, run_id: str) -> str:
    """How a drive that a pause ended says so, and the command that lifts the pause."""
    paused_run, steps = held.get("runId", run_id), [held["stepId"]] if "stepId" in held else []
    what = wording.steps_of_run(steps=steps[0], run=paused_run) if steps else wording.the_run(run=paused_run)
    return wording.drive_paused(by=held.get("by", "?"), what=what, command=hints("unpause", paused_run, *steps))


# -- `akm-run status` ---------------------------------------------------------------------------------


def _run_summary(store: Store, run: RunRow) -> dict[str, Any]:
    """The `run` object of `status --format json`."""
    summary: dict[str, Any] = {
        "id": run.id,
        "ref": run.ref,
        "title": run.title,
        "status": run.status,
        "planHash": run.plan_hash,
        "createdAt": iso(run.created_at),
        "updatedAt": iso(run.updated_at),
    }
    if run.parent_run_id is not None:
        summary["parentRunId"] = run.parent_run_id
    signer = signed_by(store, run)
    if signer is not None:
        summary["signedBy"] = signer.document()
    if run.base_commit is not None:
        summary["base"] = {"commit": run.base_commit, "repo": run.base_repo}
    if run.status == "completed":
        summary["exported"] = run.exported
    if run.status == "failed" and run.failure is not None:
        summary["failure"] = run.failure
    if run.paused is not None:
        summary["paused"] = run.paused
    if (usage := budgets.run_usage(store, run)) is not None:
        summary["usage"] = usage
    return summary


def status_document(store: Store, run: RunRow, hints: Hints) -> dict[str, Any]:
    summary = _run_summary(store, run)
    steps = []
    order = lanes.plan_order(run)
    rows = sorted(store.steps(run.id), key=lambda r: order.get(r.step_id, (len(order), None))[0])
    mapped = lanes.map_steps(run)
    units = [u for u, _ in store.run_attempts(run.id)] if mapped else []
    if any(r.status == "running" for r in rows) and not store.driven(run.id):
        for row in rows:  # its driver died: nothing runs, and the next drive starts the step again
            if row.status == "running":
                row.status = "pending"
                row.notes = f"Its driver stopped before the step finished; continue with `{hints('run', run.id)}`."
    flights = running.running_units(store, run, rows)
    for row in rows:
        entry: dict[str, Any] = {"stepId": row.step_id, "status": row.status}
        if row.step_id in flights:
            entry["running"] = [f.document(iso, f.commands(run.id, row.step_id, hints)) for f in flights[row.step_id]]
        if row.group is not None:
            entry["group"] = row.group
        own = [u for u in units if u.step_id == row.step_id]
        if row.step_id in mapped and own and lanes.shown(mapped[row.step_id], row.status, own):
            entry["units"] = lanes.units_summary(own, row.status)
        notes = children.step_notes(store, hints, run.id, row)
        if notes and row.status in ("blocked", "failed", "skipped", "pending"):
            entry["notes"] = notes
        if row.failure_reason:
            entry["failureReason"] = row.failure_reason
            entry["failureMessage"] = row.failure_message
        if row.status == "completed" or (row.status == "skipped" and row.output is not None):
            entry["output"] = row.output
        if row.paused is not None:
            entry["paused"] = row.paused
        steps.append(entry)
    document: dict[str, Any] = {"run": summary, "steps": steps}
    failed = notify.summary(store, run)
    if failed is not None:
        failed["line"] = notify.failed_line(store, run, hints)
        document["notificationFailed"] = failed
    if worktrees := [k.document() for k in kept.kept(store, [run.id])]:
        document["worktrees"] = worktrees
    tree = child_tree(store, run, hints)
    if tree:
        document["children"] = tree
    return document


def child_tree(store: Store, run: RunRow, hints: Hints) -> list[dict[str, Any]]:
    """The child runs of `run`, in spawn order, each with its own children."""
    nodes = []
    units = {u.child_run_id: u.step_id for u in store.child_units(run.id)}
    for child in store.child_runs(run.id):
        node: dict[str, Any] = {
            "runId": child.id,
            "ref": child.ref,
            "status": child.status,
            "stepId": units.get(child.id, child.parent_unit_id.split(":")[0] if child.parent_unit_id else ""),
        }
        if child.status == "blocked":
            clear = children.clearing(store, hints, child)[1]
            node["resume"] = {
                "command": " && ".join(clear),
                "then": f"{hints('resume', run.id)} && {hints('run', run.id)}",
            }
        grandchildren = child_tree(store, child, hints)
        if grandchildren:
            node["children"] = grandchildren
        nodes.append(node)
    return nodes


def status_text(document: dict[str, Any]) -> str:
    run = document["run"]
    lines = [
        f"run {run['id']}  {run['ref']}  {json.dumps(run['title'], ensure_ascii=False)}",
        f"status: {run['status']}{_why(run.get('failure'))}   plan {run['planHash'][:19]}…   created {run['createdAt']}"
        + (f"   parent {run['parentRunId']}" if "parentRunId" in run else "")
        + _pause_mark(run),
    ]
    if "signedBy" in run:
        lines.append(f"signed by {run['signedBy']['principal']} ({run['signedBy']['fingerprint']})")
    if "base" in run:
        base = run["base"]
        lines.append(wording.base_line(commit=base["commit"][:7], repo=kept.short(base["repo"] or "")))
    if "exported" in run:
        lines.append(f"exported: {_json(run['exported'])}")
    if "usage" in run:
        lines += budgets.usage_lines(run["usage"])
    lines.append("steps:")
    width = max((len(s["stepId"]) for s in document["steps"]), default=0)
    for step in document["steps"]:
        lines += _step_lines(step, width)
    lines += [kept.line(entry) for entry in document.get("worktrees", [])]
    if "children" in document:
        lines.append("children:")
        lines += _tree(document["children"], "  ")
    if "notificationFailed" in document:
        lines.append(document["notificationFailed"]["line"])
    return "\n".join(lines) + "\n"


def _pause_mark(entry: dict[str, Any]) -> str:
    """`‖ paused by NAME` after a paused run's status, or a paused step's (akm-run pause)."""
    return f"   ‖ paused by {entry['paused']['by']}" if "paused" in entry else ""


def _step_lines(step: dict[str, Any], width: int) -> list[str]:
    """A step's lines in `status`: its status, its running units, its map lanes and its notes."""
    indent = "    " if "group" in step else "  "  # a `parallel` block's members stand under it
    line = f"{indent}{STEP_GLYPHS[step['status']]} {step['stepId'].ljust(width)}  {step['status']}"
    if "failureReason" in step:
        line += f" ({step['failureReason']})" + (f": {step['failureMessage']}" if step.get("failureMessage") else "")
    units = step.get("running", [])
    line += _pause_mark(step)
    if len(units) == 1 and "itemIndex" not in units[0]:  # one unit: its activity on the step's line
        added, under = running.line(units[0])
        return [(line + "  " + added.removeprefix("running ")).rstrip(), *(f"{indent}    {h}" for h in under)]
    lines = [line.rstrip()]
    for unit in units:
        added, under = running.line(unit)
        lines.append(f"{indent}    {added}")
        lines += [f"{indent}      {hint}" for hint in under]
    if "units" in step:
        lines += lanes.summary_lines(step["units"], indent + "    ")
    if step["status"] in ("blocked", "failed", "pending", "skipped") and "notes" in step:
        lines += [f"{indent}    {note}" for note in step["notes"].splitlines()]
    return lines


def _why(failure: dict[str, Any] | None) -> str:
    """What the status line adds to a failed run's status: abandoned, or the step it failed at."""
    if failure is None:
        return ""
    if failure.get("reason") == ABANDONED:
        return " (abandoned)"
    return f" (at step {failure['stepId']}: {failure.get('reason')})" if failure.get("stepId") else ""


def _tree(nodes: list[dict[str, Any]], indent: str) -> list[str]:
    lines = []
    for node in nodes:
        lines.append(
            f"{indent}{RUN_GLYPHS[node['status']]} {node['runId']}  {node['ref']}  "
            f"(step {node['stepId']})  {node['status']}"
        )
        if "resume" in node:
            lines.append(f"{indent}    resume: {node['resume']['command']}, then {node['resume']['then']}")
        lines += _tree(node.get("children", []), indent + "  ")
    return lines


# -- `akm-run list` -----------------------------------------------------------------------------------


def list_document(runs: list[RunRow]) -> dict[str, Any]:
    entries = []
    for run in runs:
        entry: dict[str, Any] = {"id": run.id, "ref": run.ref, "status": run.status, "createdAt": iso(run.created_at)}
        if run.parent_run_id is not None:
            entry["parentRunId"] = run.parent_run_id
        entries.append(entry)
    return {"runs": entries}


def list_text(document: dict[str, Any]) -> str:
    if not document["runs"]:
        return "no runs\n"
    lines = []
    for run in document["runs"]:
        parent = f"  (child of {run['parentRunId']})" if "parentRunId" in run else ""
        lines.append(
            f"{RUN_GLYPHS[run['status']]} {run['id']}  {run['status']:<9}  {run['ref']}  {run['createdAt']}{parent}"
        )
    return "\n".join(lines) + "\n"


# -- `akm-run logs` -----------------------------------------------------------------------------------


def logs_document(store: Store, run: RunRow, step: str | None, item: int | None, attempt: int | None) -> dict[str, Any]:
    """Every attempt of the run's units (optionally of one step, one map item, one attempt number),
    with what it printed; stored values are already redacted."""
    units = []
    changed = {(k.unit_id, k.attempt): k.changed for k in kept.kept(store, [run.id])}
    for unit, attempts in store.run_attempts(run.id):
        if step is not None and unit.step_id != step:
            continue
        if item is not None and (unit.item_index if unit.item_index is not None else 0) != item:
            continue
        entry: dict[str, Any] = {"stepId": unit.step_id, "unitId": unit.unit_id, "status": unit.status}
        if unit.item_index is not None:
            entry["itemIndex"] = unit.item_index
        if unit.child_run_id is not None:
            entry["childRunId"] = unit.child_run_id
        if unit.failure_reason is not None:
            entry["failure"] = {"reason": unit.failure_reason, "message": unit.failure_message}
        entry["attempts"] = [_attempt(a, changed) for a in attempts if attempt is None or a.attempt == attempt]
        units.append(entry)
    return {"runId": run.id, "ref": run.ref, "status": run.status, "units": units}


def _attempt(row: AttemptRow, changed: dict[tuple[str, int], int]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "attempt": row.attempt,
        "dispatchId": row.dispatch_id,
        "status": row.status,
        "startedAt": iso(row.started_at),
    }
    if row.finished_at is not None:
        entry["durationMs"] = round((row.finished_at - row.started_at) * 1000)
    for key, value in (("reason", row.reason), ("message", row.message), ("exitCode", row.exit_code)):
        if value is not None:
            entry[key] = value
    if row.output_json is not None:
        entry["output"] = row.output
    if row.stderr_tail:
        entry["stderrTail"] = row.stderr_tail
    if row.last_activity_at is not None:
        entry["lastActivityAt"] = iso(row.last_activity_at)
    if row.progress is not None:
        entry["progress"] = row.progress
    if row.progress_ignored:
        entry["progressIgnored"] = row.progress_ignored
    if row.worktree is not None:
        entry["worktree"] = {"path": row.worktree, "changedFiles": changed.get((row.unit_id, row.attempt), 0)}
    if row.usage_json is not None:
        entry["usage"] = row.usage
    return entry


def logs_text(document: dict[str, Any]) -> str:
    lines = [f"run {document['runId']} ({document['ref']})  {document['status']}"]
    if not document["units"]:
        lines.append("no units")
    for unit in document["units"]:
        where = f" item {unit['itemIndex']}" if "itemIndex" in unit else ""
        child = f"  child run {unit['childRunId']}" if "childRunId" in unit else ""
        lines.append(f"{unit['stepId']}{where}  [{unit['unitId']}]  {unit['status']}{child}")
        for attempt in unit["attempts"]:
            took = f"  took {attempt['durationMs'] / 1000:.3f}s" if "durationMs" in attempt else "  (still running)"
            code = f"  exit {attempt['exitCode']}" if "exitCode" in attempt else ""
            reason = f"  {attempt['reason']}" if "reason" in attempt else ""
            lines.append(
                f"  attempt {attempt['attempt']}  {attempt['status']}{reason}{code}  "
                f"started {attempt['startedAt']}{took}"
            )
            if "message" in attempt:
                lines.append(f"    message: {attempt['message']}")
            if "progress" in attempt:
                lines.append(f"    progress: {_json(attempt['progress'])}  (last activity {attempt['lastActivityAt']})")
            if "progressIgnored" in attempt:
                lines.append(f"    {wording.progress_ignored(count=attempt['progressIgnored'])}")
            if "worktree" in attempt:
                lines.append(f"    {kept.line(attempt['worktree'])}")
            if "usage" in attempt:
                lines.append(f"    {budgets.attempt_usage_line(attempt['usage'])}")
            if "output" in attempt:
                lines.append(f"    stdout: {_json(attempt['output'])}")
            if "stderrTail" in attempt:
                lines.append("    stderr:")
                lines += [f"      | {line}" for line in attempt["stderrTail"].splitlines()]
    return "\n".join(lines) + "\n"
