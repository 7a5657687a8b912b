"""Checking many files in shares: how `akmc check` cuts them, and the worker processes that check them."""

from __future__ import annotations

import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from akmc.sources import ref_file
from akmc.workspace import uses_refs


def cut(root: Path, files: list[Path], count: int, refs: Callable[[Path], list[str]] = uses_refs) -> list[list[Path]]:
    """Cut `files` (sorted) into about `count` shares in sorted order, keeping each composition tree
    in one share (a session compiles a file's children anyway; splitting a tree would compile them
    twice): trees are taken in the order of their first file, and a share is closed once it holds
    its part of the files. The output can then be written as shares finish, in order; a tree's files
    that sort later wait, as results, for their turn. `refs(path)`: the `uses` refs a file names
    (read from the file unless the caller knows them)."""
    index = {os.path.abspath(p): i for i, p in enumerate(files)}
    parent = list(range(len(files)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, path in enumerate(files):
        for ref in refs(path):
            j = index.get(os.path.abspath(ref_file(root, ref)))
            if j is not None:
                parent[find(i)] = find(j)
    groups: dict[int, list[Path]] = {}  # by first file, in sorted order: `files` is sorted
    for i, path in enumerate(files):
        groups.setdefault(find(i), []).append(path)
    size = -(-len(files) // count)
    shares: list[list[Path]] = [[]]
    for group in groups.values():
        if len(shares[-1]) >= size:
            shares.append([])
        shares[-1].extend(group)
    return shares


class Died:
    """In place of a share's result: its worker process died twice on it (killed, out of memory)."""


DIED = Died()


class Pool:
    """Forked worker processes, each with a pipe of its own to this process. A share's result arrives
    whole or its worker is known dead (the end of its pipe), so a worker killed in the middle of
    sending leaves nothing half-read: a pool whose workers share one result queue (as
    `concurrent.futures` does) waits forever for the rest of that message. On leaving the pool with
    an error (an interrupt included) the workers are killed at once; no thread is left to wait for."""

    def __init__(self, workers: int, work: Callable[[Any], Any]) -> None:
        self._work = work
        self._count = workers
        # This process's end of each worker's pipe (a multiprocessing Connection, imported late: a
        # check of one file never needs it): the worker's pid.
        self._workers: dict[Any, int] = {}

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        for conn, pid in self._workers.items():
            try:
                if error is None:
                    conn.send(None)  # a worker between shares ends when told
                else:
                    os.kill(pid, signal.SIGKILL)
            except OSError:  # it is dead already
                pass
        for conn, pid in self._workers.items():
            conn.close()
            os.waitpid(pid, 0)
        self._workers.clear()

    def ordered(self, count: int, job: Callable[[int], Any]) -> Iterator[tuple[int, Any]]:
        """(number, result) of `job(number)` for every number below `count`, in order of number:
        each job is made when a worker takes it (so it sees what the results taken before it
        changed) and run by `work` in that worker; no job runs more than a job per worker ahead of
        the first result not yet taken. A job whose worker dies is given once more, to a
        new worker; its result is DIED if that one dies too."""
        from multiprocessing.connection import wait

        pending = deque(range(count))
        idle = [self._start() for _ in range(min(self._count, count))]
        running: dict[Any, int] = {}  # a busy worker's pipe: the number of its job
        tries: dict[int, int] = {}
        done: dict[int, Any] = {}
        following = 0
        while following < count:
            # At most a job per worker beyond the first whose result is not yet taken: a slow share
            # holds back the others instead of their results piling up here.
            while idle and pending and (pending[0] <= following + self._count or not running):
                number = pending.popleft()
                tries[number] = tries.get(number, 0) + 1
                conn = idle.pop()
                running[conn] = number
                try:
                    conn.send(job(number))
                except OSError:  # it died since its last result: found below, by the end of its pipe
                    pass
            ready: list[Any] = wait(list(running))  # the pipes that hold a result, or their end
            for conn in ready:
                number = running.pop(conn)
                try:
                    answer = conn.recv()
                except (EOFError, OSError):  # it died, perhaps in the middle of sending
                    self._bury(conn)
                    idle.append(self._start())
                    if tries[number] < 2:
                        pending.appendleft(number)
                    else:
                        done[number] = DIED
                    continue
                idle.append(conn)
                done[number] = answer
            while following in done:  # in order, a worker's error too
                answer = done.pop(following)
                yield following, answer if answer is DIED else _result(answer)
                following += 1

    def _start(self) -> Any:
        """A new worker, forked from this process (it inherits the parser): its end of the pipe."""
        from multiprocessing.connection import Pipe

        ours, theirs = Pipe()
        sys.stdout.flush()  # a forked worker must not write this process's buffered output again
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            for conn in self._workers:  # the other workers' pipes: theirs to end, not this one's
                conn.close()
            ours.close()
            _serve(theirs, self._work)
        theirs.close()
        self._workers[ours] = pid
        return ours

    def _bury(self, conn: Any) -> None:
        pid = self._workers.pop(conn)
        conn.close()
        os.kill(pid, signal.SIGKILL)  # dead already, or as good as dead: its pipe is closed
        os.waitpid(pid, 0)


def _serve(conn: Any, work: Callable[[Any], Any]) -> NoReturn:
    """A worker: run `work` on each job its pipe brings until told to end (None) or the pipe closes.
    SIGINT is left to the main process, which stops the workers: no traceback from each of them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = 0
    try:
        while (job := conn.recv()) is not None:
            try:
                answer: tuple[bool, Any] = (True, work(job))
            except Exception as error:  # noqa: BLE001 - said by the main process, which raises it
                answer = (False, f"{type(error).__name__}: {error}")
            conn.send(answer)
    except (EOFError, OSError):  # the main process went away
        pass
    except BaseException:  # noqa: BLE001 - a worker never unwinds into the main process's code
        code = 1
    finally:
        os._exit(code)  # nothing of the main process's (atexit, buffered output) runs twice


def _result(answer: tuple[bool, Any]) -> Any:
    ok, value = answer
    if not ok:
        raise RuntimeError(f"a worker process failed: {value}")
    return value
