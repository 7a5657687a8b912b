"""Composition: the multi-file workspaces under golden/compose/, each pinned by a snapshot.

A clean case pins the plan hash of every workflow; an error case pins every diagnostic as
`file:line:col CODE message`. Update on purpose only (docs/development.md)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from akm_run.plan import MAX_PLAN_BYTES, canonical_bytes, plan_hash, verify_plan
from akmc.compiler import FileResult, Session
from akmc.workspace import discover
from helpers import LANGUAGE_EXAMPLE, REPO, source

COMPOSE = REPO / "golden" / "compose"
CLEAN = ["direct", "outputs", "nested", "diamond", "map-item"]
ERRORS = sorted(p.name for p in COMPOSE.iterdir() if p.name.startswith("E"))
OTHER_ERRORS = {"output-paths": "E302"}  # deeper segments are typed by the declared output type


def _check_tree(root: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.chdir(root)  # diagnostics name files relative to the workspace, as a user there sees them
    session = Session(root)
    for path in discover([Path("workflows")]):
        session.check(path)
    return session


def _diagnostics(session: Session) -> list[str]:
    return [
        f"{d.file}:{d.span.line}:{d.span.column} {d.code} {d.message}"
        for r in session.results
        for d in r.report.diagnostics
    ]


def _children(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [s["target"] for s in plan["steps"] if s.get("target", {}).get("kind") == "child-workflow"]


@pytest.mark.parametrize("case", CLEAN)
def test_clean_case_plan_hashes(case: str, snapshot: SnapshotAssertion, monkeypatch: pytest.MonkeyPatch) -> None:
    session = _check_tree(COMPOSE / case, monkeypatch)
    assert _diagnostics(session) == []
    hashes = {}
    for result in session.results:
        assert result.plan is not None
        verify_plan(result.plan)
        hashes[result.ref] = plan_hash(result.plan)
    assert hashes == snapshot


@pytest.mark.parametrize("case", [*ERRORS, *OTHER_ERRORS])
def test_error_case_diagnostics(case: str, snapshot: SnapshotAssertion, monkeypatch: pytest.MonkeyPatch) -> None:
    diagnostics = _diagnostics(_check_tree(COMPOSE / case, monkeypatch))
    assert any(f" {OTHER_ERRORS.get(case, case)} " in line for line in diagnostics), diagnostics
    assert diagnostics == snapshot


@pytest.mark.parametrize("case", CLEAN)
def test_embedded_plan_is_byte_identical_to_the_child_compiled_alone(case: str) -> None:
    root = COMPOSE / case
    for path in discover([root / "workflows"]):
        plan = Session(root).check(path).plan
        assert plan is not None
        pending = [plan]
        while pending:
            for target in _children(pending.pop()):
                alone = Session(root).check(root / f"{target['ref']}.akm").plan
                assert canonical_bytes(target["plan"]) == canonical_bytes(alone)
                assert target["planHash"] == plan_hash(target["plan"])
                pending.append(target["plan"])


def test_bindings_are_sorted_by_name_as_literal_or_reference() -> None:
    root = COMPOSE / "outputs"
    plan = Session(root).check(root / "workflows" / "parent.akm").plan
    assert plan is not None
    checks = plan["steps"][1]["target"]
    assert checks["bindings"] == [
        {"name": "files", "kind": "reference", "from": "steps.list.output.files"},
        {"name": "strict", "kind": "literal", "value": True},
    ]
    mapped = plan["steps"][2]
    assert mapped["kind"] == "map" and mapped["target"]["kind"] == "child-workflow"


def test_read_set_covers_every_child_source_and_file(tmp_path: Path) -> None:
    shutil.copytree(LANGUAGE_EXAMPLE, tmp_path / "ws")
    root = tmp_path / "ws"
    plan = Session(root).check(root / "workflows" / "release.akm").plan
    assert plan is not None
    paths = [e["path"] for e in plan["sourceReadSet"]]
    assert "workflows/release-checklist.akm" in paths
    assert "scripts/aggregate.py" in paths
    child = Session(root).check(root / "workflows" / "release-checklist.akm").plan
    assert child is not None
    assert {e["path"] for e in child["sourceReadSet"]} <= set(paths)


def test_language_example_composes_its_checklist(snapshot: SnapshotAssertion) -> None:
    session = Session(LANGUAGE_EXAMPLE)
    for path in discover([LANGUAGE_EXAMPLE / "workflows"]):
        session.check(path)
    # the specification's example runs its shell scripts as commands: nothing else is reported
    assert {d.code for r in session.results for d in r.report.diagnostics} == {"W708"}
    assert {r.ref: plan_hash(r.plan) for r in session.results if r.plan is not None} == snapshot


class CountingSession(Session):
    """Records every compile, to show each distinct child is compiled once per invocation."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.compiled: list[str] = []

    def _compile(self, result: FileResult) -> None:
        if not result.compiled:
            self.compiled.append(result.ref or "")
        super()._compile(result)


def test_diamond_heavy_tree_compiles_each_child_once(tmp_path: Path) -> None:
    """Level n composes level n-1 twice: 2^7 embedded copies of the leaf, but 8 compiles."""
    root = tmp_path
    (root / "akm.toml").write_text("")
    (root / "workflows").mkdir()
    src = source("""
        workflow "leaf" {
          step s {
            shell "true"
          }
        }
    """)
    (root / "workflows" / "level0.akm").write_text(src)
    for i in range(1, 8):
        (root / "workflows" / f"level{i}.akm").write_text(
            f'workflow "level {i}" {{\n  step a {{\n    uses "workflows/level{i - 1}"\n  }}\n'
            f'  step b {{\n    uses "workflows/level{i - 1}"\n  }}\n}}\n'
        )
    session = CountingSession(root)
    top = session.check(root / "workflows" / "level7.akm")
    assert top.plan is not None, [d.message for d in top.report.diagnostics]
    assert sorted(session.compiled) == [f"workflows/level{i}" for i in range(8)]
    copies, pending = 0, [top.plan]
    while pending:
        children = _children(pending.pop())
        copies += len(children)
        pending += [c["plan"] for c in children]
    assert copies == 2 + 4 + 8 + 16 + 32 + 64 + 128
    verify_plan(top.plan)


def test_depth_eight_is_allowed_and_nine_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    root = COMPOSE / "E402"
    monkeypatch.chdir(root)
    assert Session(root).check(Path("workflows/level1.akm")).plan is not None
    deepest = Session(root).check(Path("workflows/level0.akm"))
    assert [d.code for d in deepest.report.diagnostics] == ["E402"]


def test_cycle_checks_the_same_from_either_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each edge of a cycle is reported at its own `uses`, whichever file the check starts from."""
    root = COMPOSE / "E401"
    monkeypatch.chdir(root)
    for first in ("workflows/a.akm", "workflows/b.akm"):
        session = Session(root)
        session.check(Path(first))
        messages = sorted(d.message for r in session.results for d in r.report.diagnostics)
        assert messages == [
            "composition cycle: workflows/a -> workflows/b -> workflows/a",
            "composition cycle: workflows/b -> workflows/a -> workflows/b",
        ]


def test_oversized_plan_is_e404_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "big.sh").write_text("#!/bin/sh\n" + "# padding padding padding\n" * 9000)
    steps = "".join(f'  step s{i} {{\n    script "scripts/big.sh"\n  }}\n' for i in range(20))
    (tmp_path / "big.akm").write_text(f'workflow "big" {{\n{steps}}}\n')
    result = Session(tmp_path).check(tmp_path / "big.akm")
    assert [d.code for d in result.report.diagnostics] == ["E404"]
    assert result.plan is None
    assert str(MAX_PLAN_BYTES) in result.report.diagnostics[0].message


def test_child_read_failure_is_e400(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "child.akm").mkdir()  # a directory where the child should be
    src = source("""
        workflow "p" {
          step c {
            uses "child"
          }
        }
    """)
    (tmp_path / "parent.akm").write_text(src)
    result = Session(tmp_path).check(tmp_path / "parent.akm")
    assert [d.code for d in result.report.diagnostics] == ["E400"]


def test_symlinked_child_outside_the_root_is_e400(tmp_path: Path) -> None:
    outside = tmp_path / "outside.akm"
    src = source("""
        workflow "o" {
          step s {
            shell "true"
          }
        }
    """)
    outside.write_text(src)
    root = tmp_path / "ws"
    root.mkdir()
    (root / "akm.toml").write_text("")
    (root / "linked.akm").symlink_to(outside)
    src = source("""
        workflow "p" {
          step c {
            uses "linked"
          }
        }
    """)
    (root / "parent.akm").write_text(src)
    result = Session(root).check(root / "parent.akm")
    assert [d.code for d in result.report.diagnostics] == ["E400"]
    assert "outside the workspace root" in result.report.diagnostics[0].message
