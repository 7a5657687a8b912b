"""Why a drive could not go on, said the same way by a local drive and by the worker pool's."""

from __future__ import annotations

from pathlib import Path

from akm_run import exitcodes
from akm_run.hints import Hints
from akm_run.locks import LockHeld
from akm_run.plan import PlanError
from akm_run.signing import SignatureRefused, SigningUnavailable


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
        return exitcodes.INTERNAL, (f"error: the state database {database} was removed while run {run_id} was "
                                    f"being driven ({type(error).__name__}: {error}); nothing more can be recorded")  # fmt: skip
    return exitcodes.INTERNAL, (f"internal error while driving run {run_id}: {type(error).__name__}: {error}; the "
                                f"run stays active and resumable: `{hints('run', run_id)}`")  # fmt: skip
