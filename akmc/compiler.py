"""The pipeline: load, parse, resolve, link children, type-check, load the files the plan freezes,
lower and bound each workflow, keeping what each stage produced.

One `Session` serves one invocation. Every file is read, parsed and compiled at most once, children
before their parents, so a tree that composes the same child many times (a diamond) costs linear work."""

from __future__ import annotations

import re
import unicodedata
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from akm_run.digest import tagged_sha256
from akm_run.plan import REF, canonical_bytes, sha256_of
from akmc import ast, compose, load, messages, syntax
from akmc.compose import Child
from akmc.diagnostics import ERROR, Report
from akmc.lower import lower
from akmc.messages import Message
from akmc.records import build, field, record
from akmc.resolve import Model, resolve
from akmc.secrets import check_values
from akmc.sources import Reader, SourceFile
from akmc.spans import keyword
from akmc.suppress import apply, directives
from akmc.typecheck import Typed, typecheck
from akmc.unfrozen import check_shells
from akmc.workspace import SUFFIX, SourceError, display_path, escaped, find_root, real_path, relative_to


@record
class FileResult:
    """Everything one file's check produced; `plan` is set only when there are no errors."""

    source: SourceFile
    text: str | None
    report: Report
    workflow: ast.Workflow | None = None  # the syntax tree; None when the file does not parse
    model: Model | None = None  # the resolved workflow; set once compiled, when it parses
    typed: Typed | None = None  # its types, with the children it composes (`typed.children`)
    data: bytes = b""
    plan: dict[str, Any] | None = None
    unreadable: str | None = None  # why the file could not be read at all
    edges: dict[str, tuple[Path | None, Message | None]] = field(default_factory=dict)  # uses ref → file, or why not
    child: Child | None = None  # what a composing workflow sees; set once compiled
    compiled: bool = False
    comments: list[tuple[str, ast.Span]] = field(default_factory=list)
    silenced: int = 0  # diagnostics removed by `# akmc: ignore` comments
    # What the result depends on, for the result cache: root-relative path → sha256 (None: absent).
    # None when the result depends on more than files (a did-you-mean over the workspace, a cycle).
    deps: dict[str, str | None] | None = None

    @property
    def path(self) -> Path:
        return self.source.path

    @property
    def display(self) -> str:
        return self.source.display

    @property
    def ref(self) -> str:
        return self.source.ref

    @property
    def root(self) -> Path:
        return self.source.root


build()


def check_file(path: Path, display: str, root: Path | None = None) -> FileResult:
    """Check one file in a session of its own. Raises SourceError when it cannot be read at all."""
    return Session(root).check(path, display)


class Session:
    """Compiles workflows for one invocation, each file at most once."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        suppressions: bool = True,
        display: Callable[[Path], str] = display_path,
        reader: Reader | None = None,
        interfaces: Callable[[Path, str], Child | None] | None = None,
    ) -> None:
        """`interfaces(path, display)` may answer for a child (resolved path; `display` names it) what
        a parent reads of it, as the result cache stores it: such a child is neither parsed nor
        compiled here."""
        self.root = root.resolve() if root is not None else None
        self.reader = reader or Reader()  # where source bytes come from: disk, or editor buffers over it
        self.suppressions = suppressions  # False for --no-ignore
        self.display = display  # how diagnostics name a file (`akmc diff --rev`: `REV:path`)
        self._files: dict[Path, FileResult] = {}  # every file read, by resolved path
        self._checked: dict[Path, None] = {}  # the files asked for and their children, in order
        self.interfaces = interfaces
        self._known: dict[Path, Child | None] = {}  # the interfaces `interfaces` answered, by resolved path
        self._real: dict[Path, Path] = {}  # the resolved path of each child located

    @property
    def results(self) -> list[FileResult]:
        """Every readable file this session compiled (the files asked for and their children), in order."""
        return [r for k in self._checked if (r := self._files[k]).unreadable is None]

    def check(self, path: Path, display: str | None = None) -> FileResult:
        """Compile one file and, first, every child it composes. Raises SourceError when it is unreadable."""
        try:
            key = self._resolved(path)
        except OSError as error:
            raise SourceError(f"cannot read {display or display_path(path)}: {error.strerror or error}") from error
        root = self.root or find_root(path.parent)
        result = self._parse(path, root, display or self.display(path))
        if result.unreadable is not None:
            del self._files[key]  # a file named on the command line that cannot be read is a usage error
            raise SourceError(result.unreadable)
        for node in self._postorder(key):
            self._compile(self._files[node])
            self._checked[node] = None
        return result

    def uses_of(self, path: Path, root: Path) -> list[Path]:
        """The files a workflow composes directly (its `uses` refs that resolve), from a parse."""
        parsed = self._parse(path, root.resolve(), self.display(path))
        return [child for child, _ in parsed.edges.values() if child is not None]

    # -- reading and ordering ----------------------------------------------------------------------

    def _parse(self, path: Path, root: Path, display: str) -> FileResult:
        key = self._resolved(path)  # callers pass paths that resolve (check() and locate() made sure)
        known = self._files.get(key)
        if known is not None:
            return known
        result = FileResult(SourceFile(key, root, relative_to(key, root), display), None, Report(display))
        self._files[key] = result
        try:
            result.data, text = load.source(self.reader, result.source, result.report)
        except SourceError as error:
            result.unreadable = str(error)
            return result
        if text is None:
            return result
        result.text = text
        result.workflow = syntax.parse(text, result.report, result.comments)
        if result.workflow is not None:
            for uses in compose.uses_targets(result.workflow):
                assert uses.path is not None
                if uses.path.value not in result.edges:
                    result.edges[uses.path.value] = compose.locate(root, uses.path.value, self.reader.is_file)
        return result

    def _children(self, key: Path) -> list[Path]:
        result = self._files[key]
        found = []
        for child, _ in result.edges.values():
            if child is not None and self._known_child(child, result) is None:
                found.append(self._parse(child, result.root, self.display(child)).path)
        return found

    def _resolved(self, path: Path) -> Path:
        """`real_path(path)`, once per path: a wide parent's children are looked up several times."""
        found = self._real.get(path)
        if found is None:
            found = self._real[path] = real_path(path)
        return found

    def _known_child(self, path: Path, parent: FileResult) -> Child | None:
        """The stored interface of the child at `path`, when `interfaces` answers for it and this
        session has not read the file itself."""
        if self.interfaces is None:
            return None
        try:
            key = self._resolved(path)
        except OSError:
            return None
        if key in self._files:
            return None
        if key not in self._known:
            # named as a compile names it: by the path located (a symlink keeps its name)
            self._known[key] = self.interfaces(key, self.display(path))
        found = self._known[key]
        # A stored result is never on a composition cycle (a cycle's results are not stored); one that
        # names the parent among its dependencies is compiled all the same, so E401 stays exact.
        if found is None or (found.deps is not None and parent.source.relative in found.deps):
            return None
        return found

    def _postorder(self, start: Path) -> list[Path]:
        """`start` and everything it composes, children first; iterative, so deep chains cannot overflow."""
        order: list[Path] = []
        visited = {start}
        stack = [(start, iter(self._children(start)))]
        while stack:
            node, pending = stack[-1]
            child = next(pending, None)
            if child is None:
                stack.pop()
                order.append(node)
            elif child not in visited and not self._files[child].compiled:
                visited.add(child)
                stack.append((child, iter(self._children(child))))
        return order

    def _path_back(self, start: Path, goal: Path) -> list[str] | None:
        """The refs along the shortest composition path from `start` to `goal`, or None when there is none."""
        previous: dict[Path, Path | None] = {start: None}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if node == goal:
                refs = []
                step: Path | None = node
                while step is not None:
                    refs.append(self._files[step].ref)
                    step = previous[step]
                return refs[::-1]
            for child in self._children(node):
                if child not in previous:
                    previous[child] = node
                    queue.append(child)
        return None

    # -- compiling ----------------------------------------------------------------------------------

    def _compile(self, result: FileResult) -> None:
        if result.compiled:
            return
        result.compiled = True
        if result.workflow is None or result.unreadable is not None:
            result.child = _summary(result, None, None)
            result.deps = result.child.deps = _own(result)
            return
        report, ref = result.report, escaped(result.ref)  # a plan never carries an undecodable name (E501)
        model = resolve(result.workflow, report)
        _portable_ref(result)
        check_values(model, report)
        children, sites = self._link(result, model)
        typed = typecheck(model, report, children)
        result.model, result.typed = model, typed
        reads = load.ReadSet()
        check_shells(model, result.root, report, reads)
        loaded = load.workspace_files(model, result.root, report, reads)
        plan: dict[str, Any] = dict(lower(model, typed, loaded, ref=ref, children=children))
        result.deps = self._deps(result, reads, children)
        chain, embedded = compose.bounds(report, ref, sites)
        compose.unbound_budget(report, result.workflow, plan)
        data = canonical_bytes(plan)
        compose.plan_size(report, plan, len(data), keyword(result.workflow.span, "workflow"))
        if not report.has_errors:
            result.plan = plan
        result.child = _summary(result, model, typed)
        result.child.deps = result.deps
        if result.plan is not None:
            result.child.plan, result.child.plan_hash, result.child.size = plan, sha256_of(data), len(data)
            result.child.canonical = data
            result.child.embedded, result.child.chain = embedded, chain
            result.child.reads = {e["path"]: e.get("sha256") for e in plan["sourceReadSet"]}
        if self.suppressions:
            # after the child summary: a silenced error still keeps the plan from being produced
            before = len(report.diagnostics)
            found = directives(result.comments)
            apply(report, found)
            result.silenced = before - len([d for d in report.diagnostics if d.code != "W704"])

    def _deps(
        self, result: FileResult, reads: load.ReadSet, children: dict[str, Child]
    ) -> dict[str, str | None] | None:
        own = _own(result)
        if own is None or any(d.code in ("E400", "E401") for d in result.report.diagnostics):
            return None
        deps = {**own, **reads.probed}
        for child in children.values():
            if child.deps is None:
                return None
            deps.update(child.deps)
        return deps

    def _link(self, result: FileResult, model: Model) -> tuple[dict[str, Child], list[tuple[ast.Span, Child]]]:
        """The compiled child of each `uses` step (E400, E401, E408), and the `uses` sites in step order."""
        children: dict[str, Child] = {}
        sites: list[tuple[ast.Span, Child]] = []
        for sm in model.steps:
            if sm.target is None or sm.target.kind != "uses":
                continue
            assert sm.target.path is not None
            ref, span = sm.target.path.value, sm.target.path.span
            located, why = result.edges[ref]
            if located is None:
                assert why is not None
                missing = why.template is messages.child_not_found
                result.report.add(why, span, help=compose.suggest(result.root, ref) if missing else None)
                continue
            key = self._resolved(located)
            known = self._known.get(key) if key not in self._files else None
            if known is not None:  # its stored interface (`_known_child`): what compiling it would give
                if not known.ok:
                    compose.failed_child(result.report, span, known)
                children[sm.id] = known
                sites.append((span, known))
                continue
            cycle = self._path_back(key, result.path)
            if cycle is not None:
                result.report.add(messages.composition_cycle(path=" -> ".join([result.ref, *cycle])), span)
                continue
            target = self._files[key]
            if target.unreadable is not None:
                result.report.add(messages.child_unreadable(ref=ref, why=target.unreadable), span)
                continue
            assert target.child is not None
            child = target.child
            if not child.ok:
                compose.failed_child(result.report, span, child)
            children[sm.id] = child
            sites.append((span, child))
        return children, sites


def _portable_ref(result: FileResult) -> None:
    """E501 when the file's ref is not a name a plan can carry (a space, a non-ASCII letter)."""
    if REF.fullmatch(result.ref) or result.workflow is None:
        return
    ascii_name = unicodedata.normalize("NFKD", result.ref).encode("ascii", "ignore").decode()
    head, _, name = re.sub(r"[^A-Za-z0-9_./-]+", "-", ascii_name).strip("-").rpartition("/")
    suggestion = f"{head}/{name or 'workflow'}" if head else name or "workflow"  # a name of no ASCII at all
    message = messages.source_name_not_portable(path=escaped(result.ref + SUFFIX), suggestion=suggestion + SUFFIX)
    result.report.add(message, keyword(result.workflow.span, "workflow"))


def _summary(result: FileResult, model: Model | None, typed: Typed | None) -> Child:
    errors = [d for d in result.report.diagnostics if d.severity == ERROR]
    child = Child(result.ref, result.display, not errors, first_error=errors[0] if errors else None)
    if model is not None and typed is not None:
        child.params = {n: (typed.params[n], p.default is None) for n, p in model.params.items()}
        child.outputs = dict(typed.outputs)
    return child


def _own(result: FileResult) -> dict[str, str | None] | None:
    """The file's own source as a dependency (None when it lies outside the root)."""
    relative = result.source.relative
    if relative is None:
        return None
    return {relative: tagged_sha256(result.data)}
