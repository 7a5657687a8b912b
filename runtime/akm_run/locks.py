"""The run lock: one driver per run, taken before anything is read or dispatched.

Two holds, both needed: an open-file-description lock on a byte of the state database that only
this run uses (the kernel releases it when the driver dies, and no unit can delete or replace it:
the database's inode is the run's journal), and `locks/<run id>.lock`, created with O_EXCL, which
says who holds the run (and keeps a driver on another host, sharing the directory, out)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

_REGION = 1 << 62  # far past anything SQLite locks (its bytes sit at 1 GiB)
_FLOCK = "hhqqi4x"  # struct flock: l_type, l_whence, l_start, l_len, l_pid
_OFD_SETLK: int = getattr(fcntl, "F_OFD_SETLK", 0)  # Linux 3.15 and later; 0: not here
_OFD_GETLK: int = getattr(fcntl, "F_OFD_GETLK", 0)
_guard = threading.Lock()
_databases: dict[str, int] = {}  # state database -> the descriptor its run locks live on (never closed:
# closing any descriptor of a file drops every POSIX lock this process holds on it, SQLite's too)
_held: set[tuple[str, str]] = set()  # (state database, run id) locked by this process


class LockHeld(Exception):
    """Another live driver holds the run's lock. `live`: the lock is known to end with its holder (a
    lock the kernel or the database server releases when the holder dies), so waiting for it ends."""

    def __init__(self, run_id: str, holder: dict[str, Any], live: bool = False) -> None:
        self.run_id = run_id
        self.holder = holder
        self.live = live
        if holder.get("pid") is None:  # its lock file was removed or replaced: the database lock says it
            super().__init__(f"run {run_id} is being driven by another process (its lock file no longer says which)")
            return
        super().__init__(
            f"run {run_id} is being driven by pid {holder.get('pid')} on {holder.get('host')} "
            f"(since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(holder.get('started', 0)))})"
        )

    @property
    def pid(self) -> Any:
        return self.holder.get("pid")


def _read(path: Path) -> str:
    """A lock file's text: never through a symlink, never more than a holder writes (a unit may
    have put a FIFO or a link to /dev/zero in its place). Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(4096).decode("utf-8", "replace")


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
        self.database = os.path.realpath(state_dir / "state.db")
        self.byte = _REGION + int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:7], "big")

    def acquire(self) -> None:
        with _guard:
            if (self.database, self.run_id) in _held:  # this process drives it: waiting would never end
                raise LockHeld(self.run_id, self._holder() or {})
            if not self._lock_byte(fcntl.F_WRLCK):  # another process's, released by the kernel as it dies
                raise LockHeld(self.run_id, self._holder() or {}, live=True)
            _held.add((self.database, self.run_id))
        try:
            self._create()
        except BaseException:
            self._let_go()
            raise

    def _create(self) -> None:
        with contextlib.suppress(OSError):  # a unit may have put a file in its place: see below
            self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is None:
                    continue  # vanished or half-written: try again
                if holder.get("host") == socket.gethostname() and not pid_alive(int(holder.get("pid", 0))):
                    self._reclaim(holder)
                    continue
                raise LockHeld(self.run_id, holder) from None
            except OSError:  # `locks` made a file or a loop by a unit: the database lock holds alone
                self.held = True
                return
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
        if (self.database, self.run_id) in _held or self._byte_taken():
            return True
        holder = self._holder()
        if holder is None:
            return False
        return holder.get("host") != socket.gethostname() or pid_alive(int(holder.get("pid") or 0))

    def _descriptor(self) -> int | None:
        if not _OFD_SETLK:
            return None  # no open-file-description locks here: the lock file alone
        if self.database not in _databases:
            for mode in (os.O_RDWR, os.O_RDONLY):
                with contextlib.suppress(OSError):
                    _databases[self.database] = os.open(self.database, mode)
                    break
        return _databases.get(self.database)

    def _lock_byte(self, kind: int) -> bool:
        """Take (F_WRLCK) or drop (F_UNLCK) this run's byte; False when another process holds it."""
        fd = self._descriptor()
        if fd is None:
            return True
        try:
            fcntl.fcntl(fd, _OFD_SETLK, struct.pack(_FLOCK, kind, os.SEEK_SET, self.byte, 1, 0))
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                return False
            return True  # a read-only database: the lock file alone (nothing can drive it anyway)
        return True

    def _byte_taken(self) -> bool:
        with _guard:
            fd = self._descriptor()
        if fd is None:
            return False
        try:
            found = fcntl.fcntl(fd, _OFD_GETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, self.byte, 1, 0))
        except OSError:
            return False
        return bool(struct.unpack(_FLOCK, found)[0] != fcntl.F_UNLCK)

    def _let_go(self) -> None:
        with _guard:
            if (self.database, self.run_id) in _held:
                self._lock_byte(fcntl.F_UNLCK)
                _held.discard((self.database, self.run_id))

    def _holder(self) -> dict[str, Any] | None:
        """Who the lock file names; a file that names no one (half-written by a holder that died,
        or rewritten by a unit) names a dead holder on this host once it is a few seconds old."""
        try:
            text = _read(self.path)
            value = json.loads(text)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            value = None
        if isinstance(value, dict) and type(value.get("pid")) is int and isinstance(value.get("host"), str):
            if not isinstance(value.get("started", 0), int | float):
                value["started"] = 0
            return value
        with contextlib.suppress(OSError):
            if time.time() - self.path.lstat().st_mtime > 5:
                return {"pid": 0, "host": socket.gethostname(), "started": 0}
        return None

    def _reclaim(self, holder: dict[str, Any]) -> None:
        # Rename first so that two reclaimers cannot both delete a fresh lock.
        stale = self.path.with_name(f"{self.path.name}.stale-{os.getpid()}")
        try:
            os.rename(self.path, stale)
        except FileNotFoundError:
            return
        try:
            current = json.loads(_read(stale) or "{}")
        except (OSError, ValueError):
            current = {}
        pid = current.get("pid") if isinstance(current, dict) else None
        if type(pid) is int and pid not in (holder.get("pid"), 0) and pid_alive(pid):
            os.rename(stale, self.path)  # someone else took it meanwhile: put it back
            return
        stale.unlink(missing_ok=True)

    def release(self) -> None:
        if self.held:
            self.held = False
            try:
                holder = json.loads(_read(self.path))
                if holder.get("pid") == os.getpid():
                    self.path.unlink(missing_ok=True)
            except (OSError, json.JSONDecodeError, AttributeError):
                pass  # removed or replaced meanwhile (a unit can): the database lock is what counts
            finally:
                self._let_go()

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
