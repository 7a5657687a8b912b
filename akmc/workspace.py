"""The workspace: its root, workflow refs, source discovery, and bounded reading of files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from akmc.ast import Span

MAX_SOURCE_BYTES = 1024 * 1024
SUFFIX = ".akm"
_SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".akmc-cache", ".akm-run"}
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


def ref_of(path: Path, root: Path) -> str | None:
    """`workflows/release` for `<root>/workflows/release.akm`; None outside the root."""
    try:
        relative = path.resolve().relative_to(root)
    except ValueError:
        return None
    text = relative.as_posix()
    return text[: -len(SUFFIX)] if text.endswith(SUFFIX) else text


def display_path(path: Path) -> str:
    """How diagnostics name a file: relative to the current directory when below it."""
    try:
        # abspath, not resolve: a symlinked file keeps the name it was given
        return Path(os.path.abspath(path)).relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def discover(paths: list[Path]) -> list[Path]:
    """Every `*.akm` file named or found below the named directories, sorted, once each."""
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for directory, subdirs, files in os.walk(path):
                subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS)
                for name in sorted(files):
                    if name.endswith(SUFFIX):
                        candidate = Path(directory) / name
                        if candidate.is_file():
                            found.setdefault(candidate, None)
        else:
            found.setdefault(path, None)
    return list(found)


@dataclass(frozen=True, slots=True)
class Source:
    """A decoded source file with its raw bytes (for hashing)."""

    text: str
    data: bytes


def read_bytes(path: Path, limit: int, name: str | None = None) -> bytes:
    """Read at most `limit + 1` bytes, so an oversized file is detected without reading it all.
    Errors name the file as `name` (how diagnostics show it) when given."""
    try:
        with path.open("rb") as handle:
            return handle.read(limit + 1)
    except IsADirectoryError as error:
        raise SourceError(f"{name or path} is a directory, not a file") from error
    except OSError as error:
        raise SourceError(f"cannot read {name or path}: {error.strerror or error}") from error


def decode_source(data: bytes) -> tuple[str | None, str | None]:
    """(text, None) for a valid source, (None, message) for E103."""
    if len(data) > MAX_SOURCE_BYTES:
        return None, f"file exceeds the source size limit of {MAX_SOURCE_BYTES} bytes (1 MiB)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, f"file is not valid UTF-8: invalid byte 0x{data[error.start]:02x} at offset {error.start}"
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, None
