"""Which file: the one identity of a workflow source, the one way a ref names a file, and the reader
that supplies a source's bytes (from disk, or from an editor's buffer laid over the disk)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from akmc.workspace import MAX_SOURCE_BYTES, SUFFIX, SourceError, read_bytes, real_path, relative_to

if TYPE_CHECKING:
    from akmc.messages import Message


class SourceFile(NamedTuple):
    """One workflow source, named once: every stage and the result cache take its names from here."""

    path: Path  # absolute; symlinks resolved when the compiler read it (a file named two ways is one file)
    root: Path  # the workspace root it belongs to (resolved)
    relative: str | None  # root-relative POSIX path; None when the file lies outside the root
    display: str  # how diagnostics name it: relative to the current directory, or `REV:path` for `diff --rev`

    @classmethod
    def at(cls, path: Path, root: Path, display: str) -> SourceFile:
        """The source at `path` in the workspace `root` (resolved). OSError when `path` cannot be resolved."""
        resolved = real_path(path)
        return cls(resolved, root, relative_to(resolved, root), display)

    @property
    def ref(self) -> str:
        """How `uses` names it: `workflows/release` for `<root>/workflows/release.akm`; the stem outside the root."""
        if self.relative is None:
            return self.path.stem
        return self.relative.removesuffix(SUFFIX)


def ref_file(root: Path, ref: str) -> Path:
    """The file a workflow ref names: the one place a ref becomes a path (callers check the ref first)."""
    return root / (ref + SUFFIX)


class Reader:
    """Reads sources from disk, except those an overlay holds: the unsaved text of open editor buffers,
    by resolved path. A session reads every source through one reader, so a buffer stands in for the
    file everywhere the file is read (as the file itself, and as a child of another workflow)."""

    def __init__(self, overlay: Mapping[Path, str] | None = None) -> None:
        self.overlay: dict[Path, str] = dict(overlay or {})

    def read(self, source: SourceFile) -> bytes:
        """At most one byte past the source size limit; SourceError when the file cannot be read at all."""
        text = self.overlay.get(source.path)
        if text is not None:
            return text.encode("utf-8", "surrogatepass")
        return read_bytes(source.path, MAX_SOURCE_BYTES, source.display)

    def is_file(self, path: Path) -> bool:
        """Whether `path` names a source file: on disk, or as an overlay buffer not yet saved."""
        if self.overlay:
            try:
                if real_path(path) in self.overlay:
                    return True
            except OSError:
                return False
        return path.is_file()


def decode_source(data: bytes) -> str | Message:
    """The text of a valid source, or the E103 message saying why it is not one."""
    from akmc import messages  # late: about 2 ms, which a check answered from the cache never needs

    if len(data) > MAX_SOURCE_BYTES:
        return messages.source_too_large(limit=MAX_SOURCE_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return messages.source_not_utf8(byte=data[error.start], offset=error.start)
    return text.removeprefix("\ufeff")


__all__ = ["MAX_SOURCE_BYTES", "Reader", "SourceError", "SourceFile", "decode_source", "ref_file"]
