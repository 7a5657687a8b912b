"""A small DBOS application that stands in for akm-run's workflows in the experiments of
test_dbos_properties.py: each worker is a separate process with its own executor id, configured
and taken over exactly as akm-run's pool does (akm_run.pool). Steps append a line to `log` in a
shared directory, so a test counts how often each one ran.

    python dbosprobe.py worker EXECUTOR_ID URL DIR TAKEOVER_S   # runs until SIGTERM
    python dbosprobe.py race EXECUTOR_ID URL DIR KEY WITHIN       # starts workflow KEY, prints its result
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType

from dbos import DBOS, SetEnqueueOptions, SetWorkflowID

from akm_run.pool import Worker, dbos_config, units_queue

RUNS, UNITS = "runs", "units"
UNITS_PER_WORKER = int(os.environ.get("PROBE_UNITS_PER_WORKER", "2"))
MAP_CONCURRENCY = 3
BOUNDED = units_queue(MAP_CONCURRENCY)
POLL_S = float(os.environ.get("PROBE_POLL_S", "0.1"))


def note(directory: str, line: str) -> None:
    """Append one line to the shared log (O_APPEND: lines of concurrent writers never mix)."""
    with open(Path(directory) / "log", "a") as log:
        log.write(line + "\n")


def wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.02)


@DBOS.step()
def record(directory: str, line: str) -> str:
    note(directory, f"{line} {DBOS.executor_id}")
    return line


# -- one run per run id, one child per invocation key ---------------------------------------------


@DBOS.workflow()
def once(directory: str, tag: str) -> str:
    record(directory, f"once {tag}")
    return str(DBOS.workflow_id)


# -- the units of one map over the workers -------------------------------------------------------------


@DBOS.step()
def unit_step(directory: str, item: int) -> str:
    note(directory, f"unit {item} start {DBOS.executor_id}")
    time.sleep(0.2)  # long enough for the other worker to dequeue the next items
    return str(DBOS.executor_id)


@DBOS.workflow()
def unit(directory: str, item: int) -> str:
    return unit_step(directory, item)


@DBOS.workflow()
def fan_out(directory: str, items: int) -> list[str]:
    handles = [DBOS.enqueue_workflow(UNITS, unit, directory, i) for i in range(items)]
    return [h.get_result() for h in handles]


@DBOS.step()
def bounded_step(directory: str, map_key: str) -> None:
    note(directory, f"bounded {map_key} start {DBOS.executor_id}")
    time.sleep(0.2)
    note(directory, f"bounded {map_key} end {DBOS.executor_id}")


@DBOS.workflow()
def bounded_unit(directory: str, map_key: str) -> None:
    bounded_step(directory, map_key)


@DBOS.workflow()
def bounded_map(directory: str, map_key: str, items: int) -> int:
    """A map whose concurrency is its queue's limit per partition; the partition is the map."""
    with SetEnqueueOptions(queue_partition_key=map_key):
        handles = [DBOS.enqueue_workflow(BOUNDED, bounded_unit, directory, map_key) for _ in range(items)]
    for handle in handles:
        handle.get_result()
    return items


@DBOS.step()
def sleep_step(seconds: float) -> None:
    subprocess.run(["sleep", str(seconds)], check=True)


@DBOS.workflow()
def sleep_unit(seconds: float) -> None:
    sleep_step(seconds)


@DBOS.workflow()
def sleep_map(directory: str, items: int, seconds: float) -> int:
    """bench/scaleout.py's map: `items` units, each a `sleep` process in one step."""
    handles = [DBOS.enqueue_workflow(UNITS, sleep_unit, seconds) for _ in range(items)]
    for handle in handles:
        handle.get_result()
    return items


# -- a worker killed mid-workflow ----------------------------------------------------------------------


@DBOS.step()
def doomed(directory: str) -> None:
    """Killed the first time it runs, once the test has started a second worker (file `go`)."""
    note(directory, f"doomed {DBOS.executor_id}")
    if not (Path(directory) / "killed").exists():
        wait_for(Path(directory) / "go")
        (Path(directory) / "killed").touch()
        os.kill(os.getpid(), signal.SIGKILL)


@DBOS.workflow()
def crashes(directory: str) -> str:
    # Not a step, as akm-run's re-verification of the stored plan is not: it runs on every
    # execution of the workflow, a recovery's replay included.
    note(directory, f"verify {DBOS.executor_id}")
    record(directory, "first")
    doomed(directory)
    record(directory, "last")
    return str(DBOS.executor_id)


# -- a drive whose durable state is the journal, not DBOS's checkpoints -----------------------------------


def dispatch(directory: str, item: int) -> str:
    """What the engine's dispatch threads do: enqueue the attempt's workflow under its dispatch id
    (stable across a takeover), and wait for its end."""
    with SetWorkflowID(f"d-{item}"):
        handle = DBOS.enqueue_workflow(UNITS, unit, directory, item)
    return handle.get_result()


@DBOS.workflow()
def drive(directory: str, items: int) -> list[str]:
    """Like the engine: no DBOS step of its own, units dispatched from threads of its own. Its first
    execution dies (SIGKILL) between two halves of the map; the recovered one starts from the top."""
    note(directory, f"drive {DBOS.executor_id}")
    with ThreadPoolExecutor(4) as threads:
        ends = list(threads.map(lambda i: dispatch(directory, i), range(items // 2)))
    if not (Path(directory) / "drive-killed").exists():
        (Path(directory) / "drive-killed").touch()
        os.kill(os.getpid(), signal.SIGKILL)
    with ThreadPoolExecutor(4) as threads:
        ends += threads.map(lambda i: dispatch(directory, i), range(items // 2, items))
    return ends


# -- waiting for an approval ---------------------------------------------------------------------------


@DBOS.workflow()
def waits(directory: str) -> str:
    record(directory, f"waiting {DBOS.workflow_id}")
    decision = DBOS.recv("approval", timeout_seconds=3600)
    return str(decision)


@DBOS.workflow()
async def waits_async(directory: str) -> str:
    await asyncio.to_thread(note, directory, f"waiting-async {DBOS.workflow_id}")
    decision = await DBOS.recv_async("approval", timeout_seconds=3600)
    return str(decision)


@DBOS.workflow()
def segment(directory: str, run_id: str, decision: str | None) -> str:
    """One drive of a run: blocked until a decision exists, then done. No wait inside."""
    if decision is None:
        record(directory, f"blocked {run_id}")
        return "blocked"
    record(directory, f"approved {run_id} {decision}")
    return "completed"


# A thread is held by a workflow while one of these is on its stack: DBOS runs a synchronous
# workflow in `_execute_workflow_wthread` on its executor pool; an awaiting coroutine is on none.
WORKFLOW_FRAMES = {"_execute_workflow_wthread", "waits", "waits_async", "segment"}


def report_threads(directory: str) -> None:
    """Log how many threads a workflow holds right now, and how many threads exist."""
    stacks: list[set[tuple[str, str]]] = []  # (file name, function name) of each thread's frames
    for top in sys._current_frames().values():
        names = set()
        frame: FrameType | None = top
        while frame is not None:
            names.add((Path(frame.f_code.co_filename).name, frame.f_code.co_name))
            frame = frame.f_back
        stacks.append(names)
    inside = sum(1 for names in stacks if any(n in WORKFLOW_FRAMES for _, n in names))
    note(directory, f"threads {inside} {len(stacks)}")


def worker(executor_id: str, url: str, directory: str, takeover_after_s: float) -> None:
    pool = Worker(
        url,
        executor_id,
        concurrency=UNITS_PER_WORKER,
        takeover_after_s=takeover_after_s,
        queue_poll_s=0.1,
        on_takeover=lambda executor: note(directory, f"took-over {executor} {executor_id}"),
        notification_listener_polling_interval_sec=0.1,
        database_queues=(RUNS, UNITS),
    )
    pool.start()
    # The probe's own queues, polled often: the experiments wait on them.
    DBOS.register_queue(RUNS, polling_interval_sec=0.1, on_conflict="always_update")
    DBOS.register_queue(
        UNITS, worker_concurrency=UNITS_PER_WORKER, polling_interval_sec=POLL_S, on_conflict="always_update"
    )
    assert pool.declare_units_queue(MAP_CONCURRENCY) == BOUNDED
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGUSR1, lambda *_: report_threads(directory))
    note(directory, f"ready {executor_id} {os.getpid()}")
    stop.wait()
    pool.stop(grace_s=0)
    os._exit(0)  # threads still blocked in a workflow would keep the interpreter from exiting


@DBOS.workflow()
def parent(directory: str, key: str) -> str:
    with SetWorkflowID(key):
        handle = DBOS.start_workflow(once, directory, key)
    return f"{handle.get_result()} {handle.get_workflow_id()}"


def race(executor_id: str, url: str, directory: str, key: str, within: str) -> None:
    """Start workflow KEY (from a parent workflow of this racer's own when `within` is "parent")."""
    DBOS(config=dbos_config(url, executor_id))
    DBOS.launch()
    note(directory, f"launched {executor_id}")
    wait_for(Path(directory) / "start")  # both racers are launched before either starts the child
    if within == "parent":
        with SetWorkflowID(f"parent-of-{key}-{executor_id}"):
            print(DBOS.start_workflow(parent, directory, key).get_result())
    else:
        with SetWorkflowID(key):
            handle = DBOS.start_workflow(once, directory, key)
        print(handle.get_result(), handle.get_workflow_id())
    DBOS.destroy(workflow_completion_timeout_sec=0)


if __name__ == "__main__":
    role, *rest = sys.argv[1:]
    if role == "worker":
        worker(rest[0], rest[1], rest[2], float(rest[3]))
    else:
        race(*rest)
