"""The workspace: its root, workflow refs, source discovery, and bounded reading of files."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Callable, Collection
from pathlib import Path

from akmc.spans import Span

MAX_SOURCE_BYTES = 1024 * 1024
SUFFIX = ".akm"
SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".akmc-cache", ".akm-run"}
FILE_START = Span(1, 1, 1, 2, 0, 0)


class SourceError(Exception):
    """A file that cannot be read at all (permissions, vanished, not a file)."""


def find_root(start: Path, override: Path | None = None) -> Path:
    """The workspace root: `--root`, else the nearest ancestor with `akm.toml`,
    else the nearest with `.git`, else the current directory."""
    if override is not None:
        return override.resolve()
    start = start.resolve()
    ancestors = [start, *start.parents]
    for marker in ("akm.toml", ".git"):
        for directory in ancestors:
            if (directory / marker).exists():
                return directory
    return Path.cwd().resolve()


def relative_to(path: Path, root: Path) -> str | None:
    """`path` relative to `root` as a POSIX path, lexically (resolve both first to follow symlinks);
    None outside the root."""
    relative = os.path.relpath(path, root)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return None
    return relative.replace(os.sep, "/")


def ref_of(path: Path, root: Path) -> str | None:
    """`workflows/release` for `<root>/workflows/release.akm` (`root` resolved); None outside the root."""
    try:
        relative = relative_to(real_path(path), root)
    except OSError:
        return None
    return relative.removesuffix(SUFFIX) if relative is not None else None


def display_path(path: Path | str) -> str:
    """How diagnostics name a file: relative to the current directory when below it, with bytes
    of the name that are not UTF-8 shown escaped (`\\xff`), so every output can print it."""
    # abspath, not resolve: a symlinked file keeps the name it was given
    relative = os.path.relpath(os.path.abspath(path), os.getcwd())
    shown = os.fspath(path) if relative.startswith("..") else relative
    return escaped(shown.replace(os.sep, "/"))


def escaped(name: str) -> str:
    """A file name as text: the bytes the file system decoded as surrogates spelt `\\xNN`."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def discover(paths: list[Path]) -> list[Path]:
    """Every `*.akm` file named or found below the named directories, sorted, once each."""
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for entry in _walk(path):
                found.setdefault(Path(entry.path), None)
        else:
            found.setdefault(path, None)
    return list(found)


def _walk(directory: Path) -> list[os.DirEntry[str]]:
    """The `*.akm` files below `directory` in sorted order (scandir: no stat for most entries)."""
    out: list[os.DirEntry[str]] = []
    pending = [str(directory)]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            try:
                if entry.is_dir():
                    if entry.name not in SKIP_DIRS:
                        subdirs.append(entry.path)
                elif entry.name.endswith(SUFFIX) and entry.is_file():
                    out.append(entry)
            except OSError:
                continue
        pending.extend(reversed(subdirs))
    return out


def real_path(path: Path) -> Path:
    """`path.resolve()`, with a symlink loop raised as OSError (Python before 3.13 raises RuntimeError)."""
    try:
        return path.resolve()
    except RuntimeError as error:
        raise OSError(errno.ELOOP, "symlink loop", str(path)) from error


def read_regular(path: Path, limit: int) -> bytes:
    """At most `limit + 1` bytes of a regular file. Opened without blocking, so a FIFO or device
    is refused (OSError) instead of hanging the read; symlink loops are OSError too."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_bytes(path: Path, limit: int, name: str | None = None) -> bytes:
    """Read at most `limit + 1` bytes, so an oversized file is detected without reading it all.
    Errors name the file as `name` (how diagnostics show it) when given."""
    try:
        return read_regular(path, limit)
    except IsADirectoryError as error:
        raise SourceError(f"{name or path} is a directory, not a file") from error
    except OSError as error:
        raise SourceError(f"cannot read {name or path}: {error.strerror or error}") from error


# -- who composes whom ------------------------------------------------------------------


# `uses` and a string, with whitespace and `#` comments between them as the grammar allows: every
# edge a parse finds is among these (and a prompt's words may add some that are not).
USES_PATTERN = re.compile(rb'\buses(?:\s|#[^\n]*)*"((?:[^"\\\n]|\\.)*)"')


def refs_in(data: bytes) -> list[str]:
    """The refs a workflow's text names after `uses` (a textual scan: may include a prompt's words)."""
    found = []
    for match in USES_PATTERN.finditer(data):
        raw = match.group(1).decode("utf-8", "replace")
        if "\\" in raw:  # an escape, spelled as the grammar's strings spell it (JSON's)
            try:
                raw = str(json.loads(f'"{raw}"'))
            except ValueError:
                continue  # not a string the grammar accepts: no edge
        found.append(raw)
    return found


def uses_refs(path: Path) -> list[str]:
    """The refs a workflow file names after `uses` (`refs_in`); nothing for a file that cannot be
    read as a regular file (a FIFO is never opened for a blocking read)."""
    try:
        data = read_regular(path, MAX_SOURCE_BYTES)
    except OSError:
        return []
    return refs_in(data)


def composer_candidates(
    root: Path, paths: list[Path], refs: Callable[[os.DirEntry[str]], list[str]] | None = None
) -> list[Path]:
    """Every workflow under `root` that may compose one of `paths`, directly or transitively.

    A fast textual scan (`refs` may answer from an index instead of reading each file); the caller
    confirms each candidate's real `uses` edges."""
    everything = _walk(root)
    given = {os.path.abspath(p) for p in paths}
    if all(os.path.abspath(e.path) in given for e in everything):
        return []  # every workflow is being checked already
    resolved_root = root.resolve()
    wanted = {r for p in paths if (r := ref_of(p, resolved_root)) is not None}
    if not wanted:
        return []
    composers: dict[str, list[str]] = {}  # ref → the paths naming it (a Path only for the few found)
    for entry in everything:
        for ref in refs(entry) if refs is not None else uses_refs(Path(entry.path)):
            composers.setdefault(ref, []).append(entry.path)
    found: dict[Path, None] = {}
    queue = list(wanted)
    while queue:
        for parent in sorted({Path(p) for p in composers.get(queue.pop(), ())}):
            relative = relative_to(Path(os.path.abspath(parent)), resolved_root)
            if parent not in found and relative is not None:
                found[parent] = None
                queue.append(relative.removesuffix(SUFFIX))
    return [p for p in found if os.path.abspath(p) not in given]


def parents(paths: list[Path], candidates: list[Path], uses: Callable[[Path], list[Path]]) -> list[Path]:
    """The candidates that really compose one of `paths`, directly or transitively, by their `uses`
    edges (`uses(candidate)` lists the files a candidate composes)."""
    changed = {os.path.abspath(p) for p in paths}
    edges = {os.path.abspath(c): [os.path.abspath(u) for u in uses(c)] for c in candidates}
    confirmed: dict[str, Path] = {}
    grew = True
    while grew:
        grew = False
        for candidate, path in zip(edges, candidates, strict=True):
            if candidate not in changed and any(u in changed for u in edges[candidate]):
                changed.add(candidate)
                confirmed[candidate] = path
                grew = True
    return list(confirmed.values())


# -- plan files -------------------------------------------------------------------------------

PLAN_SUFFIXES = (".plan.json", ".plan.json.sig")


def plan_files(directory: Path, skip: Collection[str] = (), *, follow: bool = True) -> list[Path]:
    """Every plan file and plan signature below `directory`, sorted, named through the directories
    as given. With `follow`, symlinked directories are followed (a glob that signs plans follows
    them too), each real directory once, so a symlink loop ends. Directories named in `skip` are
    not entered."""
    found: list[Path] = []
    seen: set[str] = set()
    pending = [str(directory)]
    while pending:
        current = pending.pop()
        try:
            real = os.path.realpath(current)
            with os.scandir(current) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        if real in seen:
            continue
        seen.add(real)
        subdirs = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=follow):
                    if entry.name not in skip:
                        subdirs.append(entry.path)
                elif entry.name.endswith(PLAN_SUFFIXES) and not entry.is_dir():
                    found.append(Path(entry.path))
            except OSError:
                continue
        pending.extend(reversed(subdirs))
    return sorted(found)
