"""The worker pool of `akmc check` (akmc.shares.Pool): real forked processes and their pipes."""

from __future__ import annotations

import gc
import os
import signal
import struct
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from akmc import shares


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """A pool that waits forever fails its test instead of stopping the suite."""

    def hung(signum: int, frame: Any) -> None:
        raise TimeoutError("the pool hangs")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _slow_square(job: tuple[int, float]) -> int:
    number, delay = job
    time.sleep(delay)
    return number * number


def test_results_come_in_order_of_number_whatever_order_the_workers_end_in() -> None:
    delays = [0.2, 0.0, 0.1, 0.0, 0.15, 0.0, 0.0, 0.05]
    with shares.Pool(3, _slow_square) as pool:
        got = list(pool.ordered(len(delays), lambda n: (n, delays[n])))
    assert got == [(n, n * n) for n in range(len(delays))]


def test_each_job_is_made_when_a_worker_takes_it_after_the_results_before_it() -> None:
    taken: list[int] = []
    made: dict[int, int] = {}

    def job(number: int) -> tuple[int, float]:
        made[number] = len(taken)  # how many results had been taken when this job was made
        return number, 0.0

    with shares.Pool(2, _slow_square) as pool:
        for number, _ in pool.ordered(6, job):
            taken.append(number)
    assert made[0] == made[1] == 0
    assert all(made[n] >= n - 2 for n in made)  # no job runs more than a job per worker ahead


def test_a_slow_first_job_holds_the_others_back_instead_of_piling_up_their_results() -> None:
    delays = [0.5] + [0.0] * 9
    made: dict[int, int] = {}
    taken: list[int] = []

    def job(number: int) -> tuple[int, float]:
        made[number] = len(taken)
        return number, delays[number]

    with shares.Pool(2, _slow_square) as pool:
        for number, _ in pool.ordered(len(delays), job):
            taken.append(number)
    assert taken == list(range(len(delays)))
    assert [n for n in made if made[n] == 0] == [0, 1, 2]  # while the first is slow, two more at most


def _die_mid_send(marker: Path) -> Any:
    def work(number: int) -> int:
        if number == 2 and not marker.exists():
            marker.touch()
            # The worker's own end of its pipe: the one open Connection in this process.
            [conn] = [o for o in gc.get_objects() if isinstance(o, Connection) and not o.closed]
            os.write(conn.fileno(), struct.pack("!i", 1 << 20) + b"half a message")
            os._exit(9)
        return number + 100

    return work


def test_a_worker_killed_in_the_middle_of_sending_its_result_gives_the_job_to_another(tmp_path: Path) -> None:
    with shares.Pool(2, _die_mid_send(tmp_path / "died")) as pool:
        got = dict(pool.ordered(5, lambda n: n))
    assert (tmp_path / "died").exists()
    assert got == {n: n + 100 for n in range(5)}


def _always_dies_on_3(number: int) -> int:
    if number == 3:
        os._exit(9)
    return number


def test_a_job_that_kills_every_worker_it_is_given_is_died_and_the_rest_complete() -> None:
    with shares.Pool(2, _always_dies_on_3) as pool:
        got = dict(pool.ordered(6, lambda n: n))
    assert got == {0: 0, 1: 1, 2: 2, 3: shares.DIED, 4: 4, 5: 5}


def _fails(number: int) -> int:
    raise ValueError(f"no {number}")


def test_an_error_in_a_job_is_raised_in_the_main_process_and_the_workers_end() -> None:
    pool = shares.Pool(2, _fails)
    with pytest.raises(RuntimeError, match="ValueError: no 0"), pool:
        list(pool.ordered(4, lambda n: n))
    assert not pool._workers


def _blocks(read_fd: int) -> int:
    os.read(read_fd, 1)  # nobody ever writes
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def test_an_interrupt_kills_busy_workers_instead_of_waiting_for_them() -> None:
    read_fd, write_fd = os.pipe()
    pool = shares.Pool(2, _blocks)
    pids: set[int] = set()

    def job(number: int) -> int:
        pids.update(pool._workers.values())
        return read_fd

    signal.signal(signal.SIGALRM, _interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)  # while both workers are busy, as Ctrl-C does
    with pytest.raises(KeyboardInterrupt), pool:
        list(pool.ordered(2, job))
    os.close(read_fd)
    os.close(write_fd)
    assert len(pids) == 2 and not pool._workers
    for pid in pids:
        with pytest.raises(ChildProcessError):  # killed and reaped: none is left running
            os.waitpid(pid, os.WNOHANG)


def _dies_between_jobs(number: int) -> int:
    if number == 0:
        # Its result goes out, then the worker dies before it reads its next job.
        [conn] = [o for o in gc.get_objects() if isinstance(o, Connection) and not o.closed]
        conn.send((True, number))
        os._exit(9)
    return number


def test_a_worker_that_dies_between_two_jobs_loses_neither() -> None:
    with shares.Pool(1, _dies_between_jobs) as pool:
        got = dict(pool.ordered(3, lambda n: n))
    assert got == {0: 0, 1: 1, 2: 2}
