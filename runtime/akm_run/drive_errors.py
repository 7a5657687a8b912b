"""Why a drive could not go on, said the same way by a local drive and by the worker pool's, and
what the pool says of a run it gave up on."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from akm_run import wording
from akm_run.core import DriveResult
from akm_run.hints import Hints
from akm_run.locks import LockHeld
from akm_run.plan import PlanError
from akm_run.signing import SignatureRefused, SigningUnavailable
from akm_run.wording import Failure

if TYPE_CHECKING:
    from akm_run.store import Store


def drive_failure(error: Exception, run_id: str, hints: Hints, database: Path | None = None) -> tuple[int, str]:
    """Why a drive could not go on, as (exit code, message): another driver, a plan or signature
    refused, or an internal error (a SQLite `database` removed under the driver is named as such),
    after which the attempt is finished and the run stays resumable."""
    failure = _failure(error, run_id, hints, database)
    return failure.exit, failure.text


def _failure(error: Exception, run_id: str, hints: Hints, database: Path | None) -> Failure:
    if isinstance(error, LockHeld):
        return wording.drive_lock_held(held=error, pid=error.pid)
    if isinstance(error, PlanError):
        return wording.stored_plan_refused(run=run_id, error=error)
    if isinstance(error, SignatureRefused):
        return wording.refused_run(run=run_id, error=error)
    if isinstance(error, SigningUnavailable):
        return wording.cannot_check_run(run=run_id, error=error)
    kind = type(error).__name__
    if database is not None and not database.exists():
        return wording.state_database_removed(database=database, run=run_id, kind=kind, error=error)
    return wording.internal_drive_error(run=run_id, kind=kind, error=error, command=hints("run", run_id))


def given_up(store: Store, run_id: str, what: str, resume: str) -> DriveResult:
    """The pool gave up on `what` after recovering it too many times: the run, active and resumable,
    as an interrupted drive reports it, with the units its dead workers interrupted."""
    counts = {
        u.unit_id: sum(a.status in ("interrupted", "running") for a in attempts)
        for u, attempts in store.run_attempts(run_id)
    }
    named = ", ".join(f"{unit} ({n} time{'s' * (n > 1)})" for unit, n in counts.items() if n)
    units_hint = f"; interrupted by a dying worker: {named}" if named else ""
    message = wording.pool_gave_up(what=what, units=units_hint, command=resume)
    return DriveResult(run_id, "aborted", error={"code": "ABORTED", "message": message})
