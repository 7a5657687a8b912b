"""What the language server knows of a workflow, for editor buffers laid over the disk.

The one module that talks to the compiler's session: diagnostics exactly as `akmc check` gives them
(the file, its children as compiled, and every workflow that composes it, with the workspace's
`akm.toml` selection), and the resolved, typed workflow that hover, definition and completion read,
as the session's compile left it (nothing is resolved or type-checked twice)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from akmc import ast
from akmc.cache import UsesIndex
from akmc.compiler import FileResult, Session
from akmc.compose import Child
from akmc.config import CheckConfig, ConfigError, load
from akmc.diagnostics import Diagnostic
from akmc.resolve import Model
from akmc.sources import Reader
from akmc.typecheck import Typed
from akmc.workspace import (
    SourceError,
    composer_candidates,
    display_path,
    find_root,
    parents,
    real_path,
    refs_in,
)


@dataclass(slots=True)
class Analysis:
    """One file as the checker saw it. `workflow`, `model` and `typed` are None when it does not parse."""

    path: Path
    root: Path
    text: str
    diagnostics: list[Diagnostic]
    workflow: ast.Workflow | None = None
    model: Model | None = None
    typed: Typed | None = None
    children: dict[str, tuple[Child, Path]] = field(default_factory=dict)  # `uses` step id → child, its file


@dataclass(slots=True)
class Checked:
    """The edited file's analysis, and the diagnostics of it and of every workflow composing it."""

    analysis: Analysis
    diagnostics: dict[Path, list[Diagnostic]]
    config_problem: str | None = None


def check(path: Path, buffers: Mapping[Path, str], indexes: dict[Path, UsesIndex] | None = None) -> Checked:
    """Check the file at `path` (its text from `buffers` when open there, else from disk) and the
    workflows that compose it. `buffers` maps resolved paths to unsaved text; `indexes` keeps, per
    workspace root, the `uses` refs of files on disk between checks (re-read when a file changes).
    Raises SourceError when the file is neither open nor readable."""
    key = real_path(path)
    root = find_root(key.parent)
    config, problem = _config(root)
    session = Session(root, reader=Reader(buffers))  # the buffers stand in for their files everywhere
    result = session.check(key, display_path(key))
    found = {key: _reported(result, config)}
    index = (indexes if indexes is not None else {}).setdefault(root, UsesIndex(root, load=False))
    for parent in _composers(root, key, session, buffers, index):
        try:
            parent_result = session.check(parent, display_path(parent))
        except SourceError:
            continue
        found[real_path(parent)] = _reported(parent_result, config)
    text = buffers.get(key, result.text or "")  # the text the editor holds, which requests are about
    return Checked(_analysis(result, session, root, text, found[key]), found, problem)


def _config(root: Path) -> tuple[CheckConfig, str | None]:
    try:
        return load(root), None
    except ConfigError as error:
        return CheckConfig(), str(error)


def _reported(result: FileResult, config: CheckConfig) -> list[Diagnostic]:
    return [d for d in result.report.diagnostics if config.reports(d.code)]


def _composers(root: Path, path: Path, session: Session, buffers: Mapping[Path, str], index: UsesIndex) -> list[Path]:
    """The workflows that compose `path`, directly or transitively, reading open buffers first."""

    def refs(entry: os.DirEntry[str]) -> list[str]:
        text = buffers.get(Path(entry.path))  # entries lie under the resolved root: no resolving per file
        if text is None:
            return index.refs(entry)
        return refs_in(text.encode("utf-8", "surrogatepass"))

    candidates = composer_candidates(root, [path], refs)
    if not candidates:
        return []
    return parents([path], candidates, lambda candidate: session.uses_of(candidate, root))


def _analysis(result: FileResult, session: Session, root: Path, text: str, found: list[Diagnostic]) -> Analysis:
    """The file as its compile left it (the tree, the model, the types), and the compiled child of
    each `uses` whose file was found, even one the compile refused to link (a cycle): hover shows it
    and definition goes to it."""
    analysis = Analysis(result.path, root, text, found, result.workflow, result.model, result.typed)
    if result.model is None:
        return analysis
    compiled = {r.path: r for r in session.results}
    for sm in result.model.steps:
        if sm.target is None or sm.target.kind != "uses" or sm.target.path is None:
            continue
        located, _ = result.edges.get(sm.target.path.value, (None, None))
        child = compiled.get(real_path(located)) if located is not None else None
        if child is not None and child.child is not None:
            analysis.children[sm.id] = (child.child, child.path)
    return analysis
