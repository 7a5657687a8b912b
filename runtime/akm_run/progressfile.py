"""An attempt's progress file (`AKM_PROGRESS`, docs/runtime.md "Progress and stalls"), followed line by
line as the unit appends to it, without trusting it: the one reader of that file, with which the
activity channel (akm_run.activity) and the usage reader (akm_run.budgets) each read their lines.

The file belongs to the unit: it may delete, replace or truncate it, put a link, a pipe or a
directory at its path, or write faster than it is read. A regular file that takes its place is read
from its start; anything else there is ignored; nothing is ever opened through a link or blocks on
a pipe. A read takes at most WINDOW_BYTES: a longer backlog is skipped to the first line that starts
in its newest window. `last_line` reads backwards from the file's end instead, for the one line of
a kind that is wanted however much follows it."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from akm_run.usagelines import MAX_LINE_BYTES

WINDOW_BYTES = 64 * 1024  # read per look at most: a unit that writes more has its backlog skipped
SCAN_BYTES = 1 << 20  # read per step of a backward scan

Read = list[tuple[bytes, int]]  # complete lines, each with the offset just past its newline


class Follower:
    """The progress file at `path`, from the descriptor `fd` (the file the drive created) or, without
    one, from the regular file found there at the first read. `leaving` is called before the follower
    starts over (a new file at the path, or this one truncated), while it still reads the file it
    leaves: what that file holds can be looked at one last time."""

    def __init__(self, path: Path, fd: int | None = None, leaving: Callable[[], None] | None = None) -> None:
        self.path, self.leaving = path, leaving
        self._fd: int | None = None
        self._ino: int | None = None
        self._offset = 0
        self._partial = bytearray()
        self._skipping = False  # inside a line that is skipped (too long, or cut by a skipped backlog)
        if fd is not None:
            self._adopt(fd)

    @classmethod
    def created(cls, path: Path) -> Follower:
        """Create the file, private (0600), never through a link, and follow it."""
        return cls(path, os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))

    def _adopt(self, fd: int) -> None:
        if self._fd is not None:
            if self.leaving is not None:
                self.leaving()
            os.close(self._fd)
        self._fd, self._ino = fd, os.fstat(fd).st_ino
        self._restart()

    def _restart(self) -> None:
        self._offset, self._skipping = 0, False
        self._partial.clear()

    def _follow(self) -> None:
        """Read the file now at the path, if a unit put a different regular file there."""
        try:
            seen = os.lstat(self.path)
        except OSError:
            return
        if seen.st_ino == self._ino or not stat.S_ISREG(seen.st_mode):
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return
        self._adopt(fd)

    def read(self) -> Read:
        """The complete lines the unit appended since the last read (at most WINDOW_BYTES of them),
        each cut to MAX_LINE_BYTES + 1 bytes: a line that long is not a valid line anyway. A line
        that grows past that before its newline is given once, cut, and the rest of it skipped."""
        self._follow()
        if self._fd is None:
            return []
        try:
            size = os.fstat(self._fd).st_size
            if size < self._offset:  # truncated: start again
                if self.leaving is not None:
                    self.leaving()
                self._restart()
            if size - self._offset > WINDOW_BYTES:  # a backlog: only the newest lines matter
                self._offset = size - WINDOW_BYTES
                self._skipping = os.pread(self._fd, 1, self._offset - 1) != b"\n"  # inside a line?
                self._partial.clear()
            start = self._offset
            chunk = os.pread(self._fd, WINDOW_BYTES, start)
        except OSError:
            return []
        self._offset += len(chunk)
        return self._split(chunk, start)

    def _split(self, chunk: bytes, at: int) -> Read:
        found: Read = []
        *complete, rest = chunk.split(b"\n")
        for piece in complete:
            at += len(piece) + 1
            if self._skipping:
                self._skipping = False
                continue
            self._partial += piece
            found.append((bytes(self._partial[: MAX_LINE_BYTES + 1]), at))
            self._partial.clear()
        if not self._skipping:
            self._partial += rest
            if len(self._partial) > MAX_LINE_BYTES:
                found.append((bytes(self._partial[: MAX_LINE_BYTES + 1]), at + len(rest)))
                self._partial.clear()
                self._skipping = True
        return found

    def last_line(self, wanted: Callable[[bytes], bool], since: int, marks: tuple[bytes, ...]) -> bytes | None:
        """The last line past offset `since` (a line's start) of the file read now that `wanted`
        accepts, the file's last line included without its newline. The file is read backwards
        from its end, so nothing before that line is read; only a line of at most MAX_LINE_BYTES
        that holds one of `marks` is offered to `wanted`."""
        if self._fd is None:
            return None
        try:
            pos = os.fstat(self._fd).st_size
            carry = b""  # the start of the line that straddles `pos`, read already (its last bytes)
            while pos > since:
                start = max(since, pos - SCAN_BYTES)
                chunk = os.pread(self._fd, pos - start, start)
                if len(chunk) != pos - start:  # truncated meanwhile: what was there is gone
                    return None
                buffer, pos = chunk + carry, start
                first = 0 if start == since else buffer.find(b"\n") + 1  # where its complete lines start
                if first == 0 and start > since:  # no line starts here: it goes on further back
                    carry = buffer[-(MAX_LINE_BYTES + 1) :]
                    continue
                line = _last_marked(buffer, first, wanted, marks)
                if line is not None:
                    return line
                carry = buffer[: max(first - 1, 0)][-(MAX_LINE_BYTES + 1) :]
        except OSError:
            return None
        return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _last_marked(buffer: bytes, first: int, wanted: Callable[[bytes], bool], marks: tuple[bytes, ...]) -> bytes | None:
    """The last line of `buffer[first:]` that holds a mark and that `wanted` accepts."""
    end = len(buffer)
    while (at := max(buffer.rfind(mark, first, end) for mark in marks)) >= 0:
        begin = buffer.rfind(b"\n", first, at) + 1 or first
        stop = buffer.find(b"\n", at)
        line = buffer[begin : len(buffer) if stop < 0 else stop]
        if len(line) <= MAX_LINE_BYTES and wanted(line):
            return line
        end = begin
    return None
