"""Why a drive could not go on, said the same way by a local drive and by the worker pool's, and
what the pool says of a run it gave up on."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from akm_run import exitcodes
from akm_run.core import DriveResult
from akm_run.hints import Hints
from akm_run.locks import LockHeld
from akm_run.plan import PlanError
from akm_run.signing import SignatureRefused, SigningUnavailable

if TYPE_CHECKING:
    from akm_run.store import Store


def drive_failure(error: Exception, run_id: str, hints: Hints, database: Path | None = None) -> tuple[int, str]:
    """Why a drive could not go on, as (exit code, message): another driver, a plan or signature
    refused, or an internal error (a SQLite `database` removed under the driver is named as such),
    after which the attempt is finished and the run stays resumable."""
    if isinstance(error, LockHeld):
        return exitcodes.LOCKED, f"{error}; wait for it to finish, or stop pid {error.pid}"
    if isinstance(error, PlanError):
        return exitcodes.REFUSED, f"refused run {run_id}: its stored plan does not verify: {error}"
    if isinstance(error, SignatureRefused):
        return exitcodes.REFUSED, f"refused run {run_id}: {error}"
    if isinstance(error, SigningUnavailable):
        return exitcodes.USAGE, f"cannot check the signature of run {run_id}: {error}"
    if database is not None and not database.exists():
        return exitcodes.INTERNAL, (
            f"error: the state database {database} was removed while run {run_id} was "
            f"being driven ({type(error).__name__}: {error}); nothing more can be recorded"
        )
    return exitcodes.INTERNAL, (
        f"internal error while driving run {run_id}: {type(error).__name__}: {error}; the "
        f"run stays active and resumable: `{hints('run', run_id)}`"
    )


def given_up(store: Store, run_id: str, what: str, resume: str) -> DriveResult:
    """The pool gave up on `what` after recovering it too many times: the run, active and resumable,
    as an interrupted drive reports it, with the units its dead workers interrupted."""
    counts = {
        u.unit_id: sum(a.status in ("interrupted", "running") for a in attempts)
        for u, attempts in store.run_attempts(run_id)
    }
    named = ", ".join(f"{unit} ({n} time{'s' * (n > 1)})" for unit, n in counts.items() if n)
    units_hint = f"; interrupted by a dying worker: {named}" if named else ""
    message = (
        f"the worker pool gave up on {what}: its worker died each time DBOS recovered it (a unit that "
        f"kills its worker or its host does that){units_hint}; the run stays active and resumable: `{resume}`"
    )
    return DriveResult(run_id, "aborted", error={"code": "ABORTED", "message": message})
