"""The golden corpus: plan hashes and rendered diagnostics are pinned; committed plans are current.

Update on purpose only: `python -m pytest tests/test_golden.py --snapshot-update`, and
say in the commit why a hash or a diagnostic changed (docs/development.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from syrupy.assertion import SnapshotAssertion

from akm_run.plan import plan_hash, verify_file
from akmc.compiler import check_file
from akmc.planmodel import plan_file_schema
from akmc.render import text
from conftest import REPO, run_cli

CORPUS = REPO / "golden" / "corpus"
ERRORS = REPO / "golden" / "errors"
EXAMPLES = REPO / "examples"
PLANS = sorted((CORPUS / "plans").rglob("*.plan.json"))


def _compiled(root: Path) -> dict[str, str]:
    hashes = {}
    for path in sorted((root / "workflows").glob("*.akm")):
        result = check_file(path, path.name, root)
        assert result.plan is not None, [d.message for d in result.report.diagnostics]
        hashes[result.ref or ""] = plan_hash(result.plan)
    return hashes


def test_plan_hashes(snapshot: SnapshotAssertion) -> None:
    assert {"corpus": _compiled(CORPUS), "examples": _compiled(EXAMPLES)} == snapshot


def test_committed_plans_are_up_to_date() -> None:
    result = run_cli("compile", "workflows", "--out-dir", "plans", "--check", cwd=CORPUS)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.stem)
def test_schema_and_decoder_agree_on_golden_plans(plan: Path) -> None:
    data = plan.read_bytes()
    verify_file(data)
    jsonschema.validate(json.loads(data), plan_file_schema())


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.stem)
def test_round_trip_is_byte_identical(plan: Path) -> None:
    from akm_run.plan import render_file

    assert render_file(verify_file(plan.read_bytes())) == plan.read_text()


def _error_cases() -> list[Path]:
    return sorted(ERRORS.glob("*.akm"))


@pytest.mark.parametrize("case", _error_cases(), ids=lambda p: p.stem)
def test_error_case_produces_exactly_its_code(case: Path) -> None:
    """`E207.akm` and `E207-timeout-on-uses.akm` (one case per situation) each produce exactly that code."""
    result = check_file(case, case.name, ERRORS)
    assert [d.code for d in result.report.diagnostics] == [case.stem.split("-")[0]]


def test_rendered_error_diagnostics(snapshot: SnapshotAssertion) -> None:
    rendered = {}
    for case in _error_cases():
        result = check_file(case, case.name, ERRORS)
        rendered[case.stem] = text.render(result.report.diagnostics, {case.name: result.text or ""}, 1, quiet=True)
    assert rendered == snapshot
