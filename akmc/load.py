"""The load stage: every file a workflow needs, read once and frozen, so that no later stage reads one.

Before the parse, a source's bytes (through the session's `Reader`: the disk, or an editor buffer
over it; E103). Once the workflow is checked, the workspace files its model names (`script`,
`file(...)`): containment, portability, size and script rules (E500–E502), their bytes frozen; and
every text and env literal the plan will carry searched for credentials (E600). Lowering receives
the `Loaded` files and builds the plan from them alone."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from akm_run.digest import tagged_sha256
from akm_run.plan import REF
from akmc import ast, messages
from akmc.diagnostics import Report
from akmc.messages import Message
from akmc.records import build, field, record
from akmc.resolve import Model
from akmc.secrets import looks_like_credential
from akmc.sources import Reader, SourceFile, decode_source
from akmc.workspace import FILE_START, read_regular, real_path

MAX_SCRIPT_BYTES = 256 * 1024

# What each text is called in E600: the commands, prompts and approval texts a plan carries.
TEXTS = {
    "shell": "the command",
    "agent": "the prompt",
    "approval": "the approval text",
    "description": "the description",
}


@record
class Frozen:
    path: str
    text: str
    sha256: str


@record
class ReadSet:
    """Every workspace path a compile looked at, root-relative → `sha256:…`, or None when it was
    absent: what the result depends on besides sources (the result cache re-checks these)."""

    probed: dict[str, str | None] = field(default_factory=dict)

    def probe(self, path: str, data: bytes | None) -> str:
        """Record a path the compile depended on; its digest ("" when absent)."""
        digest = tagged_sha256(data) if data is not None else ""
        self.probed[path] = digest or None
        return digest


@record
class Loaded:
    """The workspace files a workflow's plan freezes, by how the source names them: ("script" or
    "file", the path as written) → the frozen file. A file that could not be frozen is absent (and
    reported)."""

    files: dict[tuple[str, str], Frozen] = field(default_factory=dict)


build()


def source(reader: Reader, file: SourceFile, report: Report) -> tuple[bytes, str | None]:
    """A source's bytes and its text, or None for the text with E103 when it is not a valid source.
    Raises SourceError when the file cannot be read at all."""
    data = reader.read(file)
    text = decode_source(data)
    if not isinstance(text, str):
        report.add(text, FILE_START)
        return data, None
    return data, text


def workspace_files(model: Model, root: Path, report: Report, reads: ReadSet) -> Loaded:
    """Freeze the files the plan of `model` carries and search its texts for credentials, in the
    order the plan holds them: the description, then each work step's target, gate check and env."""
    loading = _Loading(root, report, reads)
    if model.description is not None:
        loading.text(model.description, "description")
    for sm in model.steps:
        if sm.kind == "route":
            continue  # a route carries no target, gate or env
        for target in (sm.target, sm.gate_check):
            if target is not None:
                loading.target(target)
        loading.env(sm.env)
    if model.notify is not None:
        if model.notify.target is not None:
            loading.target(model.notify.target)
        loading.env(model.notify.env)
    return loading.loaded


class _Loading:
    """One workflow's files, each read at most once; a problem is reported wherever it is named."""

    def __init__(self, root: Path, report: Report, reads: ReadSet) -> None:
        self.root, self.report, self.reads = root, report, reads
        self.loaded = Loaded()
        self.problems: dict[tuple[str, str], Message] = {}

    def file(self, raw: str, span: ast.Span, what: str) -> Frozen | None:
        key = (what, raw)
        if key not in self.loaded.files and key not in self.problems:
            outcome = freeze(self.root, raw, what, self.reads)
            if isinstance(outcome, Frozen):
                self.loaded.files[key] = outcome
            else:
                self.problems[key] = outcome
        if key in self.problems:
            self.report.add(self.problems[key], span)
        return self.loaded.files.get(key)

    def text(self, text: ast.Text, what: str) -> None:
        """A text the plan carries (a `file(...)` frozen); E600 when it holds what looks like a credential."""
        value = text.value
        if text.kind == "file":
            frozen = self.file(text.value, text.span, "file")
            value = frozen.text if frozen is not None else ""
        found = looks_like_credential(value)
        if found:
            self.report.add(messages.credential_in_text(what=TEXTS.get(what, what), found=found), text.span)

    def target(self, target: ast.Target) -> None:
        if target.kind == "script":
            assert target.path is not None
            self.file(target.path.value, target.path.span, "script")
        elif target.kind != "uses":  # a child's files are its own plan's
            assert target.text is not None
            self.text(target.text, target.kind)

    def env(self, entries: dict[str, ast.EnvEntry]) -> None:
        for name in sorted(entries):
            entry = entries[name]
            if entry.kind == "literal":
                assert entry.value is not None
                found = looks_like_credential(entry.value)
                if found:
                    self.report.add(messages.credential_in_env(name=name, found=found), entry.value_span)


def freeze(root: Path, raw: str, what: str, reads: ReadSet) -> Frozen | Message:
    """Read a workspace file named in the source, or the E500/E501/E502 message saying why not."""
    pure = PurePosixPath(raw)
    if raw.startswith("/") or pure.is_absolute() or "\\" in raw or (len(raw) > 1 and raw[1] == ":"):
        return messages.path_absolute(what=what, path=raw)
    if ".." in pure.parts:
        return messages.path_climbs(what=what, path=raw)
    if not raw or raw in (".",):
        return messages.file_not_found(what=what, path=raw)
    if not REF.fullmatch(pure.as_posix()):  # the plan format's pattern for every path it names
        return messages.path_not_portable(what=what, path=raw)
    candidate = root / pure
    try:
        resolved = real_path(candidate)
        resolved.relative_to(root.resolve())
    except ValueError:
        return messages.path_escapes(what=what, path=raw)
    except OSError:
        return messages.file_not_found(what=what, path=raw)
    if not resolved.is_file():
        reads.probe(pure.as_posix(), None)
        return messages.file_not_found(what=what, path=raw)
    try:
        data = read_regular(resolved, MAX_SCRIPT_BYTES)
    except OSError as error:
        return messages.file_unreadable(what=what, path=raw, why=str(error.strerror or error))
    digest = reads.probe(pure.as_posix(), data)
    if len(data) > MAX_SCRIPT_BYTES:
        return messages.file_too_large(what=what, path=raw, limit_kib=MAX_SCRIPT_BYTES // 1024)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return messages.file_not_utf8(what=what, path=raw)
    if what == "script" and not text.startswith("#!"):
        return messages.script_without_shebang(path=raw)
    return Frozen(pure.as_posix(), text, digest)
