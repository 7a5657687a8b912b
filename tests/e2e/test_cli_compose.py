"""Composition through the real `akmc check`, `compile` and `verify` commands, on the
multi-file workspaces under golden/compose/ and the diagnostics pages that show them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from helpers import REPO, run_cli

COMPOSE = REPO / "golden" / "compose"
PAGES = REPO / "docs" / "diagnostics"
FILE_EXAMPLE = re.compile(r"```akm file=(\S+)\n(.*?)```", re.S)
OUTPUT = re.compile(r"`akmc check -q workflows` there prints:\n\n```text\n(.*?)```", re.S)
COMPOSE_PAGES = sorted(p.stem for p in PAGES.glob("*.md") if FILE_EXAMPLE.search(p.read_text()))


def test_checking_a_child_rechecks_the_parents_it_breaks(tmp_path: Path) -> None:
    shutil.copytree(COMPOSE / "nested", tmp_path / "ws")
    root = tmp_path / "ws"
    assert run_cli("check", "workflows/build.akm", cwd=root).returncode == 0
    build = root / "workflows" / "build.akm"
    build.write_text(build.read_text().replace("artifact: {", "binary: {"))
    result = run_cli("check", "workflows/build.akm", cwd=root)
    assert result.returncode == 1
    assert "workflows/stage.akm:8:" in result.stdout and "error[E407]" in result.stdout
    assert "workflows/release.akm" in result.stdout and "error[E408]" in result.stdout
    assert "(3 files checked)" in result.stdout


def test_a_uses_inside_a_prompt_does_not_make_a_parent(tmp_path: Path) -> None:
    shutil.copytree(COMPOSE / "direct", tmp_path / "ws")
    root = tmp_path / "ws"
    (root / "workflows" / "talker.akm").write_text(
        'workflow "mentions" {\n  step s {\n    agent """\n      Never write uses "workflows/leaf" here.\n      """\n  }\n}\n'
    )
    result = run_cli("check", "workflows/leaf.akm", cwd=root)
    assert result.returncode == 0
    assert "(2 files checked)" in result.stdout  # leaf and its real parent, not the prompt


def test_child_errors_are_reported_once(tmp_path: Path) -> None:
    result = run_cli("check", "--no-cache", ".", cwd=COMPOSE / "E408")
    assert result.returncode == 1
    assert result.stdout.count("error[E203]") == 1 and result.stdout.count("error[E408]") == 1


def test_compile_and_verify_a_composing_workflow(tmp_path: Path) -> None:
    root = COMPOSE / "nested"
    out = tmp_path / "release.plan.json"
    assert run_cli("compile", "workflows/release.akm", "-o", str(out), cwd=root).returncode == 0
    assert run_cli("verify", str(out), cwd=root).returncode == 0
    result = run_cli("compile", "workflows", "--out-dir", str(tmp_path / "plans"), cwd=root)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "plans" / "workflows").iterdir()) == [
        "build.plan.json",
        "release.plan.json",
        "stage.plan.json",
    ]


def test_composition_codes_have_multi_file_examples() -> None:
    assert set(COMPOSE_PAGES) >= {"E307", "E400", "E401", "E402", "E403", "E405", "E406", "E407", "E408"}


@pytest.mark.parametrize("code", COMPOSE_PAGES)
def test_multi_file_example_is_the_compose_fixture_and_its_output(code: str) -> None:
    """The files a page shows are the golden/compose/<CODE>/ workspace, and the output is what akmc prints there."""
    page = (PAGES / f"{code}.md").read_text()
    case = REPO / "golden" / "compose" / code
    for name, body in FILE_EXAMPLE.findall(page):
        assert (case / name).read_text() == body, name
    shown = OUTPUT.search(page)
    assert shown is not None
    result = run_cli("check", "-q", "--no-cache", "workflows", cwd=case)
    assert result.stdout == shown.group(1)
