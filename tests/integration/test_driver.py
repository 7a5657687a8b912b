"""The services commands share (akmc/driver.py), and the layering they keep: a command never imports
another command, a renderer never imports a command."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from akm_run.plan import render_file
from akmc import exitcodes
from akmc.driver import compile_one, load_plan
from helpers import REPO

AKMC = REPO / "akmc"
SOURCE = textwrap.dedent("""\
    workflow "hello" {
      step greet {
        shell "echo hello"
      }
    }
    """)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "hello.akm").write_text(SOURCE)
    return tmp_path


def test_a_source_loads_as_its_compiled_plan(root: Path) -> None:
    plan, code = load_plan(root / "hello.akm", root)
    assert code == exitcodes.OK
    assert plan is not None and [s["stepId"] for s in plan["steps"]] == ["greet"]


def test_a_plan_file_loads_only_when_it_verifies(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan, _ = load_plan(root / "hello.akm", root)
    assert plan is not None
    (root / "hello.plan.json").write_text(render_file(plan))
    assert load_plan(root / "hello.plan.json", root) == (plan, exitcodes.OK)
    (root / "bad.plan.json").write_text(render_file(plan).replace("echo hello", "echo HELLO"))
    assert load_plan(root / "bad.plan.json", root) == (None, exitcodes.REFUSED)
    assert "akmc: refused" in capsys.readouterr().err


def test_a_source_with_errors_loads_no_plan_and_reports_on_stderr(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (root / "broken.akm").write_text(SOURCE.replace("greet {", "greet {\n    inputs = [steps.nope.output]"))
    assert load_plan(root / "broken.akm", root) == (None, exitcodes.FINDINGS)
    captured = capsys.readouterr()
    assert "E203" in captured.err and captured.out == ""


def test_a_missing_source_is_a_usage_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_one(root / "absent.akm", root) == (None, None, exitcodes.USAGE)
    assert "akmc: error:" in capsys.readouterr().err


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@pytest.mark.parametrize("path", sorted((AKMC / "commands").glob("*.py")), ids=lambda p: p.stem)
def test_a_command_never_imports_another_command(path: Path) -> None:
    others = {f"akmc.commands.{p.stem}" for p in (AKMC / "commands").glob("*.py")} - {f"akmc.commands.{path.stem}"}
    assert not _imports(path) & others


@pytest.mark.parametrize("path", sorted((AKMC / "render").glob("*.py")), ids=lambda p: p.stem)
def test_a_renderer_never_imports_a_command(path: Path) -> None:
    assert not any(name.startswith("akmc.commands") for name in _imports(path))
