"""`akm-run worker`: its options checked, then this host's share of the shared store's pool served
(akm_run.drives) until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
from pathlib import Path

from akm_run import exitcodes
from akm_run.console import fail
from akm_run.database_url import select
from akm_run.durations import parse_option as parse_duration

WORKER_DURATION_MAX_MS = 24 * 3_600_000  # longer waits overflow the platform's timers
# DBOS keeps a queue's polling interval in the shared database, and each worker's --poll overwrites
# it for every worker (docs/scale-out.md): a long one would starve the whole pool that long.
POLL_MAX_MS = 60_000
EXECUTOR_ID_MAX = 128


def executor_refusal(executor_id: str) -> str | None:
    """Why a worker cannot take this executor id (it is printed, and stored by DBOS), or None."""
    if len(executor_id) > EXECUTOR_ID_MAX:
        return f"--executor-id must be at most {EXECUTOR_ID_MAX} characters"
    if not executor_id.isprintable() or any(c.isspace() for c in executor_id):  # bytes not UTF-8 are neither
        return f"--executor-id {executor_id!r} must be printable text without spaces"
    return None


def worker(args: argparse.Namespace) -> int:
    """`akm-run worker`: serve the shared store's pool until SIGTERM or SIGINT."""
    import socket

    shared = select(getattr(args, "database", None))
    assert shared is not None  # cli.store_refusal requires one
    try:
        takeover_ms, poll_ms, grace_ms = (parse_duration(d) for d in (args.takeover_after, args.poll, args.grace))
    except ValueError as error:
        return fail(str(error), exitcodes.USAGE)
    if args.concurrency < 1:
        return fail("--concurrency must be at least 1", exitcodes.USAGE)
    if takeover_ms < 300 or poll_ms < 10:
        return fail("--takeover-after must be at least 300ms and --poll at least 10ms", exitcodes.USAGE)
    if max(takeover_ms, grace_ms) > WORKER_DURATION_MAX_MS or poll_ms > POLL_MAX_MS:
        return fail("--takeover-after and --grace must be at most 24h, --poll at most 1m", exitcodes.USAGE)
    executor_id = args.executor_id or socket.gethostname()
    if refusal := executor_refusal(executor_id):
        return fail(refusal, exitcodes.USAGE)
    workdir = args.workdir or Path(".")
    if not workdir.is_dir():
        return fail(f"--workdir {workdir} is not a directory", exitcodes.USAGE)
    from akm_run import drives

    return drives.serve(
        shared.url,
        executor_id,
        concurrency=args.concurrency,
        takeover_after_s=takeover_ms / 1000,
        workdir=workdir,
        poll_s=poll_ms / 1000,
        grace_s=grace_ms / 1000,
    )
