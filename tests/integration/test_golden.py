"""The golden corpus: plan hashes and rendered diagnostics are pinned; committed plans are current.

Update on purpose only: `python -m pytest tests/integration/test_golden.py --snapshot-update`, and
say in the commit why a hash or a diagnostic changed (docs/development.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

from akm_run.plan import plan_hash, render_file, verify_file
from akmc.compiler import Session, check_file
from akmc.planschema import plan_file_schema
from akmc.render import text
from helpers import LANGUAGE_EXAMPLE, REPO
from profiles import examples

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


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.stem)
def test_schema_and_decoder_agree_on_golden_plans(plan: Path) -> None:
    data = plan.read_bytes()
    verify_file(data)
    jsonschema.validate(json.loads(data), plan_file_schema())


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.stem)
def test_round_trip_is_byte_identical(plan: Path) -> None:
    assert render_file(verify_file(plan.read_bytes())) == plan.read_text()


def _error_cases() -> list[Path]:
    return sorted(ERRORS.glob("*.akm"))


@pytest.mark.parametrize("case", _error_cases(), ids=lambda p: p.stem)
def test_error_case_produces_exactly_its_code(case: Path) -> None:
    """`E207.akm` and `E207-timeout-on-uses.akm` (one case per situation) each produce exactly that code."""
    result = check_file(case, case.name, ERRORS)
    assert [d.code for d in result.report.diagnostics] == [case.stem.split("-")[0]]


@pytest.mark.parametrize("case", _error_cases(), ids=lambda p: p.stem)
def test_rendered_error_diagnostics(case: Path, snapshot: SnapshotAssertion) -> None:
    """One snapshot per case, so a changed message names its case in the failure and in the commit's diff."""
    result = check_file(case, case.name, ERRORS)
    assert text.render(result.report.diagnostics, {case.name: result.text or ""}, 1, quiet=True) == snapshot


def _hashes(root: Path) -> dict[str, str]:
    session = Session(root)
    hashes = {}
    for path in sorted((root / "workflows").glob("*.akm")):
        plan = session.check(path).plan
        assert plan is not None
        hashes[path.name] = plan_hash(plan)
    return hashes


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_comments_and_blank_lines_leave_every_plan_hash_unchanged(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """The read set records `.akm` sources by path only, so formatting never changes a plan."""
    root = tmp_path_factory.mktemp("ws")
    shutil.copytree(LANGUAGE_EXAMPLE, root, dirs_exist_ok=True)
    before = _hashes(root)
    for path in sorted((root / "workflows").glob("*.akm")):
        lines = path.read_text().splitlines()
        # block openers and closers are never inside a text block in this corpus
        places = [i for i, line in enumerate(lines) if line.rstrip().endswith("{") or line.strip() == "}"]
        chosen = data.draw(st.sets(st.sampled_from(places), min_size=1), label=path.name)
        comment = data.draw(st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=20))
        for i in sorted(chosen, reverse=True):
            lines[i] = f"{lines[i]}   # {comment}"
            lines.insert(i, "")
        path.write_text("\n\n" + "\n".join(lines) + "\n\n\n")
    assert _hashes(root) == before


def test_a_script_or_prompt_edit_changes_the_plan_hash(tmp_path: Path) -> None:
    shutil.copytree(LANGUAGE_EXAMPLE, tmp_path, dirs_exist_ok=True)
    before = _hashes(tmp_path)
    with (tmp_path / "prompts" / "review-file.md").open("a") as handle:
        handle.write("\nAlso check the licence header.\n")
    after = _hashes(tmp_path)
    assert after["release.akm"] != before["release.akm"]
    assert after["release-checklist.akm"] == before["release-checklist.akm"]
