"""`akm-run preflight`, and the preflight that `run`, `resume` and `approve` do before they publish a
run or let one go on (docs/runtime.md, "Preflight"): the checks are akm_run.preflight's."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from akm_run import exitcodes, preflight, wording
from akm_run.console import emit, escaped, fail, state_dir
from akm_run.planformat import PlanError
from akm_run.preflight import Finding, Host
from akm_run.rows import RunRow, StepRow, StepStatus
from akm_run.store import Store
from akm_run.storedplans import stored_plan
from akm_run.stores import shared_store
from akm_run.wording import Failure


def host(args: argparse.Namespace, row: RunRow | None = None, *, pooled: bool) -> Host:
    """The host a command checks: its workdir, agent command and notifier (the command line's, else
    the run's, else `.`, $AKM_AGENT_CMD and $AKM_RUN_NOTIFY_CMD) and, on SQLite, its state directory.
    On the pool a run's own workdir is the worker's to check (a worker without it runs units in its
    own workdir), and so is its repository (`git`)."""
    given: Path | None = getattr(args, "workdir", None)
    if given is not None:
        workdir, named = given.absolute(), wording.given_workdir(workdir=given)
    elif row is not None and row.workdir and not pooled:
        workdir, named = Path(row.workdir), wording.remembered_workdir(workdir=row.workdir)
    else:
        workdir, named = Path(".").absolute(), wording.given_workdir(workdir=".")
    agent_cmd = getattr(args, "agent_cmd", None) or (row.agent_cmd if row is not None else None)
    notify_cmd = (
        getattr(args, "notify_cmd", None)
        or (row.notify_cmd if row is not None else None)
        or os.environ.get("AKM_RUN_NOTIFY_CMD")
        or None
    )
    directory = None if pooled else state_dir(args)
    base = row.base_commit if row is not None else None
    git = not (pooled and row is not None)
    return Host(os.environ, workdir, named, agent_cmd, directory, base, git=git, notify_cmd=notify_cmd)


def skipped(args: argparse.Namespace) -> bool:
    """Whether the command was told to skip the checks (it says so on stderr)."""
    if not getattr(args, "no_preflight", False):
        return False
    print(f"akm-run: {wording.preflight_skipped()}", file=sys.stderr)
    return True


def _said(findings: list[Finding], fmt: str, refusal: Failure) -> int | None:
    """Say the findings on stderr (warnings only: and go on); None unless an error ends the command,
    whose refusal is said first (and, with --format json, the findings document on stdout)."""
    if not preflight.failed(findings):
        sys.stderr.write(escaped(preflight.text(findings), keep="\n"))
        return None
    if fmt == "json":
        emit(preflight.document(findings), "", fmt)
    code = fail(refusal)
    sys.stderr.write(escaped(preflight.text(findings), keep="\n"))
    return code


def before_publish(args: argparse.Namespace, plan: Mapping[str, Any], fmt: str) -> int | None:
    """`run PLAN`: None when the plan may be published on this host, else exit 5 with every finding."""
    findings = preflight.check(plan, host(args, pooled=shared_store(args) is not None))
    return _said(findings, fmt, wording.preflight_failed_unpublished())


def before_drive(
    args: argparse.Namespace,
    store: Store,
    row: RunRow,
    fmt: str = "text",
    becoming: Mapping[str, StepStatus] | None = None,
) -> int | None:
    """`run RUN_ID`, `resume`, `approve`, `skip`, `retry`: None when the steps of the run that can
    still run (once the steps in `becoming` have the status given there: the one `skip` settles, the
    ones `retry` reopens) may run here, else exit 5 (the run is not changed) with every finding."""
    pooled = shared_store(args) is not None
    try:
        plan = stored_plan(row)
    except PlanError as error:  # a stored plan changed since it was published: refused, as a drive would
        return fail(wording.stored_plan_refused(run=row.id, error=error))
    after = becoming or {}
    rows = [replace(r, status=after[r.step_id]) if r.step_id in after else r for r in store.steps(row.id)]
    findings = preflight.check(plan, host(args, row, pooled=pooled), rows)
    return _said(findings, fmt, wording.preflight_failed_unchanged(run=row.id))


def state_refusal(args: argparse.Namespace, run_id: str) -> int | None:
    """The state check alone, for `run RUN_ID` before the run is read (its store may not be writable)."""
    findings = list(preflight.check_state(preflight.Subject([], host(args, pooled=False))))
    return _said(findings, "text", wording.preflight_failed_unchanged(run=run_id))


def report(plan: Mapping[str, Any], checked: Host, rows: list[StepRow] | None, fmt: str) -> int:
    """`akm-run preflight`: print every finding on stdout; exit 0, or 5 when one is an error."""
    findings = preflight.check(plan, checked, rows)
    emit(preflight.document(findings), preflight.text(findings) or wording.preflight_ok() + "\n", fmt)
    if preflight.failed(findings):
        return fail(wording.preflight_failed(errors=sum(1 for f in findings if f.severity == "error")))
    return exitcodes.COMPLETED
