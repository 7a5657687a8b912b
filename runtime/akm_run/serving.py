"""`akm-run worker`: its options checked, then this host's share of the shared store's pool served
(akm_run.drives) until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

from akm_run import wording
from akm_run.console import fail
from akm_run.database_url import select
from akm_run.durations import parse_option as parse_duration
from akm_run.pruning import retention_refusal
from akm_run.wording import Failure

WORKER_DURATION_MAX_MS = 24 * 3_600_000  # longer waits overflow the platform's timers
# DBOS keeps a queue's polling interval in the shared database, and each worker's --poll overwrites
# it for every worker (docs/scale-out.md): a long one would starve the whole pool that long.
POLL_MAX_MS = 60_000
EXECUTOR_ID_MAX = 128


def executor_refusal(executor_id: str) -> Failure | None:
    """Why a worker cannot take this executor id (it is printed, and stored by DBOS), or None."""
    if len(executor_id) > EXECUTOR_ID_MAX:
        return wording.executor_id_too_long(limit=EXECUTOR_ID_MAX)
    if not executor_id.isprintable() or any(c.isspace() for c in executor_id):  # bytes not UTF-8 are neither
        return wording.executor_id_not_printable(executor_id=executor_id)
    return None


def worker(args: argparse.Namespace) -> int:
    """`akm-run worker`: serve the shared store's pool until SIGTERM or SIGINT."""
    shared = select(getattr(args, "database", None))
    assert shared is not None  # cli.store_refusal requires one
    try:
        takeover_ms, poll_ms, grace_ms = (parse_duration(d) for d in (args.takeover_after, args.poll, args.grace))
    except ValueError as error:
        return fail(wording.bad_duration(error=error))
    if args.concurrency < 1:
        return fail(wording.concurrency_below_one())
    if takeover_ms < 300 or poll_ms < 10:
        return fail(wording.worker_durations_too_short())
    if max(takeover_ms, grace_ms) > WORKER_DURATION_MAX_MS or poll_ms > POLL_MAX_MS:
        return fail(wording.worker_durations_too_long())
    if (refused := retention_refusal()) is not None:
        return refused
    executor_id = args.executor_id or socket.gethostname()
    if refusal := executor_refusal(executor_id):
        return fail(refusal)
    workdir = args.workdir or Path(".")
    if not workdir.is_dir():
        return fail(wording.workdir_not_a_directory(workdir=workdir))
    from akm_run import drives  # DBOS and psycopg, about 0.6 s: only once the options are checked

    return drives.serve(
        shared.url,
        executor_id,
        concurrency=args.concurrency,
        takeover_after_s=takeover_ms / 1000,
        workdir=workdir,
        poll_s=poll_ms / 1000,
        grace_s=grace_ms / 1000,
        notify_cmd=args.notify_cmd or os.environ.get("AKM_RUN_NOTIFY_CMD") or None,
    )
