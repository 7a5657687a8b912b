"""What `akmc check` keeps in the cache of a fresh result, and what a session reads from it of an
unchanged child instead of compiling it (its interface, akmc.interfaces)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from akmc.cache import Cache, Cached
from akmc.render.text import shown_lines
from akmc.workspace import real_path, relative_to

# COMPILER_IMPORT (akmc.commands.check): the compiler's stages are imported only when something
# must be compiled.
if TYPE_CHECKING:
    from akmc.compiler import FileResult
    from akmc.compose import Child


def record(result: FileResult) -> Cached:
    """What the cache keeps of a fresh result; `uses` names the children it composes inside the root."""
    uses = [
        r
        for child, _ in result.edges.values()
        if child is not None and (r := relative_to(real_path(child), result.root))
    ]
    diagnostics = list(result.report.diagnostics)
    lines = shown_lines(result.text, diagnostics) if result.text is not None else {}
    child = result.child
    return Cached(result.source, lines, diagnostics, uses=tuple(uses), deps=result.deps, child=kept(child))


def kept(child: Child | None) -> Child | None:
    """What the cache keeps of a compiled child (`akmc.interfaces`): its plan as bytes, not as the
    objects it decodes to, which a record from a worker process would carry across for nothing."""
    from akmc.compose import Child  # COMPILER_IMPORT

    if child is None:
        return None
    kept = Child(
        child.ref, child.file, child.ok, dict(child.params), dict(child.outputs), first_error=child.first_error
    )
    kept.plan_hash, kept.canonical, kept.size = child.plan_hash, child.canonical, child.size
    kept.embedded, kept.chain = child.embedded, child.chain
    return kept


def interfaces(cache: Cache | None) -> Callable[[Path, str], Child | None] | None:
    """What a session reads of an unchanged child instead of compiling it: its cached interface."""
    if cache is None:
        return None

    def interface(path: Path, display: str) -> Child | None:
        relative = cache.relative(path)
        return cache.interface(relative, display) if relative is not None else None

    return interface
