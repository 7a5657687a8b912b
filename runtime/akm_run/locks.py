"""The run lock: one driver per run, taken with O_EXCL before anything is read or dispatched."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any


class LockHeld(Exception):
    """Another live driver holds the run's lock."""

    def __init__(self, run_id: str, holder: dict[str, Any]) -> None:
        self.run_id = run_id
        self.holder = holder
        super().__init__(
            f"run {run_id} is being driven by pid {holder.get('pid')} on {holder.get('host')} "
            f"(since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(holder.get('started', 0)))})"
        )

    @property
    def pid(self) -> Any:
        return self.holder.get("pid")


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLock:
    """`<state-dir>/locks/<run id>.lock` holding {pid, host, started}; removed on release.

    A lock whose holder is dead (same host) is reclaimed; a lock of another host is never
    reclaimed automatically."""

    def __init__(self, state_dir: Path, run_id: str) -> None:
        self.path = state_dir / "locks" / f"{run_id}.lock"
        self.run_id = run_id
        self.held = False

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is None:
                    continue  # vanished or half-written: try again
                if holder.get("host") == socket.gethostname() and not pid_alive(int(holder.get("pid", 0))):
                    self._reclaim(holder)
                    continue
                raise LockHeld(self.run_id, holder) from None
            with os.fdopen(fd, "w") as handle:
                json.dump({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            self.held = True
            return
        holder = self._holder() or {}
        raise LockHeld(self.run_id, holder)

    def driven(self) -> bool:
        """Whether a live driver (or one on another host, which cannot be checked) holds the lock."""
        holder = self._holder()
        if holder is None:
            return False
        return holder.get("host") != socket.gethostname() or pid_alive(int(holder.get("pid") or 0))

    def _holder(self) -> dict[str, Any] | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            # a holder that died between create and write: treat as dead when the file is stale
            if time.time() - self.path.stat().st_mtime > 5:
                return {"pid": 0, "host": socket.gethostname(), "started": 0}
            return None
        return value if isinstance(value, dict) else None

    def _reclaim(self, holder: dict[str, Any]) -> None:
        # Rename first so that two reclaimers cannot both delete a fresh lock.
        stale = self.path.with_name(f"{self.path.name}.stale-{os.getpid()}")
        try:
            os.rename(self.path, stale)
        except FileNotFoundError:
            return
        try:
            current = json.loads(stale.read_text() or "{}")
        except (OSError, json.JSONDecodeError):
            current = {}
        if current.get("pid") not in (holder.get("pid"), None, 0) and pid_alive(int(current.get("pid", 0))):
            os.rename(stale, self.path)  # someone else took it meanwhile: put it back
            return
        stale.unlink(missing_ok=True)

    def release(self) -> None:
        if self.held:
            self.held = False
            try:
                holder = json.loads(self.path.read_text())
            except (OSError, json.JSONDecodeError):
                return
            if holder.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
