"""What `akm-run` prints: run results, status (text and JSON, with the children tree), lists."""

from __future__ import annotations

import json
import time
from typing import Any

from akm_run import children
from akm_run.engine import Result
from akm_run.hints import Hints
from akm_run.store import RunRow, Store

STEP_GLYPHS = {"completed": "✓", "failed": "✗", "blocked": "⚠", "running": "→", "pending": "·", "skipped": "↷"}
RUN_GLYPHS = {"completed": "✓", "failed": "✗", "blocked": "⚠", "active": "→"}


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# -- `akm-run run` ------------------------------------------------------------------------------------


def result_document(result: Result, run: RunRow) -> dict[str, Any]:
    document: dict[str, Any] = {
        "runId": run.id,
        "ref": run.ref,
        "status": "active" if result.status == "aborted" else result.status,
        "planHash": run.plan_hash,
    }
    if result.status == "completed":
        document["exported"] = result.exported
    for key in ("failure", "blocked", "error"):
        if getattr(result, key) is not None:
            document[key] = getattr(result, key)
    return document


def result_text(result: Result, run: RunRow, hints: Hints) -> str:
    head = f"run {run.id} ({run.ref})"
    if result.error is not None:
        lines = [f"{head}: error {result.error['code']}: {result.error['message']}"]
    elif result.status == "completed":
        lines = [f"{head} completed", f"exported: {_json(result.exported)}"]
    elif result.status == "failed":
        failure = result.failure or {}
        lines = [
            f"{head} failed at step {failure.get('stepId')}: {failure.get('reason')}: {failure.get('message')}",
            f"see `{hints('status', run.id)}`",
        ]
    elif result.status == "blocked":
        blocked = result.blocked or {}
        where = f" at step {blocked['stepId']}" if blocked.get("stepId") else ""
        lines = [f"{head} blocked{where}", *("  " + line for line in str(blocked.get("notes", "")).splitlines())]
    else:
        lines = [f"{head} is {result.status}"]
    return "\n".join(lines) + "\n"


# -- `akm-run status` ---------------------------------------------------------------------------------


def status_document(store: Store, run: RunRow, hints: Hints) -> dict[str, Any]:
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
    if run.status == "completed":
        summary["exported"] = run.exported
    steps = []
    for row in store.steps(run.id):
        entry: dict[str, Any] = {"stepId": row.step_id, "status": row.status}
        notes = children.step_notes(store, hints, run.id, row)
        if notes and row.status in ("blocked", "failed", "skipped"):
            entry["notes"] = notes
        if row.failure_reason:
            entry["failureReason"] = row.failure_reason
            entry["failureMessage"] = row.failure_message
        if row.status == "completed":
            entry["output"] = row.output
        steps.append(entry)
    document: dict[str, Any] = {"run": summary, "steps": steps}
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
        f"status: {run['status']}   plan {run['planHash'][:19]}…   created {run['createdAt']}"
        + (f"   parent {run['parentRunId']}" if "parentRunId" in run else ""),
    ]
    if "exported" in run:
        lines.append(f"exported: {_json(run['exported'])}")
    lines.append("steps:")
    width = max((len(s["stepId"]) for s in document["steps"]), default=0)
    for step in document["steps"]:
        line = f"  {STEP_GLYPHS[step['status']]} {step['stepId'].ljust(width)}  {step['status']}"
        if "failureReason" in step:
            line += f" ({step['failureReason']})" + (
                f": {step['failureMessage']}" if step.get("failureMessage") else ""
            )
        lines.append(line.rstrip())
        if step["status"] in ("blocked", "failed") and "notes" in step:
            lines += [f"      {note}" for note in step["notes"].splitlines()]
    if "children" in document:
        lines.append("children:")
        lines += _tree(document["children"], "  ")
    return "\n".join(lines) + "\n"


def _tree(nodes: list[dict[str, Any]], indent: str) -> list[str]:
    lines = []
    for node in nodes:
        lines.append(f"{indent}{RUN_GLYPHS[node['status']]} {node['runId']}  {node['ref']}  "
                     f"(step {node['stepId']})  {node['status']}")  # fmt: skip
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
