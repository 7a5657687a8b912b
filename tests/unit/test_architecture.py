"""The limits that keep both packages readable: no function over 60 lines, no module over 500 lines,
and no import cycle between first-party modules (module-level imports, read with `ast`)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from helpers import REPO

MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500
PACKAGES = {"akm_run": REPO / "runtime" / "akm_run", "akmc": REPO / "akmc"}


def _modules(package: str) -> dict[str, Path]:
    root = PACKAGES[package]
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def long_functions(package: str) -> list[str]:
    out = []
    for name, path in _modules(package).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out.append(f"{name}.{node.name} ({length} lines)")
    return out


def long_modules(package: str) -> list[str]:
    out = []
    for name, path in _modules(package).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            out.append(f"{name} ({lines} lines)")
    return out


def _imports(name: str, path: Path, known: set[str], *, deferred: bool) -> set[str]:
    """The first-party modules `name` imports at module level, and with `deferred` inside functions
    too; never those under `if TYPE_CHECKING:`, which do not run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _import_nodes(tree, deferred):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {module for module in found if module in known and module != name}


def _import_nodes(tree: ast.Module, deferred: bool) -> list[ast.stmt]:
    if not deferred:
        return list(tree.body)
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    return [node for node in ast.walk(tree) if isinstance(node, ast.stmt) and id(node) not in typing_only]


def import_cycles(package: str, *, deferred: bool = False) -> list[list[str]]:
    """Cycles in the import graph of a package's modules; `deferred` counts imports inside functions."""
    modules = _modules(package)
    known = set(modules)
    edges = {name: sorted(_imports(name, path, known, deferred=deferred)) for name, path in modules.items()}
    cycles, state = [], {}  # 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for child in edges[node]:
            if state.get(child) == 1:
                cycles.append([*path[path.index(child) :], child])
            elif not state.get(child):
                visit(child, [*path, child])
        state[node] = 2

    for start in sorted(edges):
        if not state.get(start):
            visit(start, [start])
    return cycles


CHECKS: dict[str, Callable[[str], Sequence[object]]] = {
    "function length": long_functions,
    "module length": long_modules,
    "import cycles": import_cycles,
}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_the_runtime_keeps_the_limits(check: str) -> None:
    assert CHECKS[check]("akm_run") == []


def test_the_runtime_has_no_cycle_even_through_deferred_imports() -> None:
    assert import_cycles("akm_run", deferred=True) == []


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_the_compiler_keeps_the_limits(check: str) -> None:
    assert CHECKS[check]("akmc") == []


def test_the_compiler_has_no_cycle_even_through_deferred_imports() -> None:
    assert import_cycles("akmc", deferred=True) == []


def test_the_checks_find_what_they_look_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n\ndef f():\n" + "    x = 1\n" * 60)
    (package / "b.py").write_text("from pkg.a import f\n" + "\n" * 500)
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    monkeypatch.setitem(PACKAGES, "pkg", package)
    assert long_functions("pkg") == ["pkg.a.f (61 lines)"]
    assert long_modules("pkg") == ["pkg.b (501 lines)"]
    assert import_cycles("pkg") == [["pkg.a", "pkg.b", "pkg.a"]]
