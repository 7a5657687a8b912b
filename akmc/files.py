"""Workspace files a workflow reads (`script`, `file(...)`): containment, script rules, frozen bytes."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from akm_run.digest import tagged_sha256
from akm_run.plan import REF
from akmc import ast, messages
from akmc.diagnostics import Report
from akmc.records import build, field, record
from akmc.workspace import read_regular, real_path

MAX_SCRIPT_BYTES = 256 * 1024


@record
class Frozen:
    path: str
    text: str
    sha256: str


@record
class ReadSet:
    """Every workspace file a compile read, by root-relative path → `sha256:…`, or None for an
    `.akm` source: its meaning is in the plan, so formatting and comments never change a plan."""

    files: dict[str, str | None] = field(default_factory=dict)
    probed: dict[str, str | None] = field(default_factory=dict)  # every path looked at: its hash, or None if absent

    def add(self, path: str, data: bytes) -> str:
        digest = self.probe(path, data)
        self.files[path] = digest
        return digest

    def add_source(self, path: str) -> None:
        """A workflow source, recorded by path only."""
        self.files[path] = None

    def probe(self, path: str, data: bytes | None) -> str:
        """Record a path the compile depended on without reading it into the plan (the result cache
        re-checks these)."""
        digest = tagged_sha256(data) if data is not None else ""
        self.probed[path] = digest or None
        return digest

    def entries(self) -> list[dict[str, str]]:
        return [{"path": p} if (h := self.files[p]) is None else {"path": p, "sha256": h} for p in sorted(self.files)]


build()


def freeze(root: Path, raw: str, span: ast.Span, what: str, report: Report, reads: ReadSet) -> Frozen | None:
    """Read a workspace file named in the source; E500/E501/E502 on failure."""
    pure = PurePosixPath(raw)
    if raw.startswith("/") or pure.is_absolute() or "\\" in raw or (len(raw) > 1 and raw[1] == ":"):
        report.add(messages.path_absolute(what=what, path=raw), span)
        return None
    if ".." in pure.parts:
        report.add(messages.path_climbs(what=what, path=raw), span)
        return None
    if not raw or raw in (".",):
        report.add(messages.file_not_found(what=what, path=raw), span)
        return None
    if not REF.fullmatch(pure.as_posix()):  # the plan format's pattern for every path it names
        report.add(messages.path_not_portable(what=what, path=raw), span)
        return None
    candidate = root / pure
    try:
        resolved = real_path(candidate)
        resolved.relative_to(root.resolve())
    except ValueError:
        report.add(messages.path_escapes(what=what, path=raw), span)
        return None
    except OSError:
        report.add(messages.file_not_found(what=what, path=raw), span)
        return None
    if not resolved.is_file():
        reads.probe(pure.as_posix(), None)
        report.add(messages.file_not_found(what=what, path=raw), span)
        return None
    try:
        data = read_regular(resolved, MAX_SCRIPT_BYTES)
    except OSError as error:
        report.add(messages.file_unreadable(what=what, path=raw, why=str(error.strerror or error)), span)
        return None
    reads.probe(pure.as_posix(), data)
    if len(data) > MAX_SCRIPT_BYTES:
        report.add(messages.file_too_large(what=what, path=raw, limit_kib=MAX_SCRIPT_BYTES // 1024), span)
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        report.add(messages.file_not_utf8(what=what, path=raw), span)
        return None
    if what == "script" and not text.startswith("#!"):
        report.add(messages.script_without_shebang(path=raw), span)
        return None
    normal = pure.as_posix()
    return Frozen(normal, text, reads.add(normal, data))
