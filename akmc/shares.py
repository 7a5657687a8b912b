"""Checking many files in shares: how `akmc check` cuts them, and the worker processes that check them."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from akmc.sources import ref_file
from akmc.workspace import uses_refs


def cut(root: Path, files: list[Path], count: int) -> list[list[Path]]:
    """Cut `files` (sorted) into about `count` shares in sorted order, keeping each composition tree
    in one share (a session compiles a file's children anyway; splitting a tree would compile them
    twice): trees are taken in the order of their first file, and a share is closed once it holds
    its part of the files. The output can then be written as shares finish, in order; a tree's files
    that sort later wait, as results, for their turn."""
    index = {os.path.abspath(p): i for i, p in enumerate(files)}
    parent = list(range(len(files)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, path in enumerate(files):
        for ref in uses_refs(path):
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


class Pool:
    """Forked worker processes (they inherit the parser) that an interrupt or an error stops at once,
    instead of waiting for the shares they are checking."""

    def __init__(self, workers: int) -> None:
        # late: multiprocessing and concurrent.futures cost about 20 ms (50 modules), which a check
        # of one file, done in its own process, never needs
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("fork")
        self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_quiet_worker)

    def __enter__(self) -> Any:
        return self.pool

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if error is None:
            self.pool.shutdown(wait=True)
            return
        # No public way to stop a running worker before Python 3.14 (`terminate_workers`).
        for process in list(getattr(self.pool, "_processes", {}).values()):
            process.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)


def _quiet_worker() -> None:
    """A worker leaves SIGINT to the main process, which stops it: no traceback from each worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
