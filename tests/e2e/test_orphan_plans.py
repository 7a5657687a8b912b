"""A plan file no source accounts for: `compile --check` fails naming it, `diff --rev` shows it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from akm_run.plan import render_file
from helpers import REPO, committed, run_cli

CORPUS = REPO / "golden" / "corpus"
EVIL = {"format": "akm-plan", "planHash": "sha256:" + "0" * 64, "plan": {"irVersion": 1, "ref": "workflows/evil"}}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    shutil.copytree(CORPUS, tmp_path / "ws")
    return tmp_path / "ws"


def _check(ws: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("compile", "workflows", "--out-dir", "plans", "--check", cwd=ws)


def test_the_committed_corpus_has_no_orphan(ws: Path) -> None:
    assert _check(ws).returncode == 0


@pytest.mark.parametrize(
    "name",
    ["workflows/evil.plan.json", "workflows/deep/er/evil.plan.json", "evil.plan.json", "workflows/.hidden.plan.json"],
)
def test_a_plan_without_a_source_fails_the_gate_naming_it(ws: Path, name: str) -> None:
    orphan = ws / "plans" / name
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_text(json.dumps(EVIL))
    result = _check(ws)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [f"orphan:  plans/{name}"]
    assert "no source compiles to" in result.stderr and "Traceback" not in result.stderr


def test_a_signature_without_its_plan_is_an_orphan_too(ws: Path) -> None:
    (ws / "plans" / "workflows" / "gone.plan.json.sig").write_text("-----BEGIN SSH SIGNATURE-----\n")
    (ws / "plans" / "workflows" / "minimal.plan.json.sig").write_text("-----BEGIN SSH SIGNATURE-----\n")
    result = _check(ws)
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["orphan:  plans/workflows/gone.plan.json.sig"]


def test_orphans_behind_a_symlinked_directory_are_found_and_a_loop_ends(ws: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "evil.plan.json").write_text(json.dumps(EVIL))
    os.symlink(elsewhere, ws / "plans" / "workflows" / "linked")
    os.symlink(ws / "plans", ws / "plans" / "workflows" / "loop")
    result = _check(ws)
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["orphan:  plans/workflows/linked/evil.plan.json"]


def test_the_output_directory_being_a_symlink_still_counts(ws: Path, tmp_path: Path) -> None:
    shutil.move(ws / "plans", tmp_path / "real-plans")
    os.symlink(tmp_path / "real-plans", ws / "plans")
    (ws / "plans" / "workflows" / "evil.plan.json").write_text("{}")
    assert _check(ws).stdout.splitlines() == ["orphan:  plans/workflows/evil.plan.json"]


def test_a_stale_plan_and_an_orphan_are_both_listed(ws: Path) -> None:
    (ws / "plans" / "workflows" / "minimal.plan.json").write_text("{}")
    (ws / "plans" / "workflows" / "evil.plan.json").write_text("{}")
    assert _check(ws).stdout.splitlines() == [
        "stale:   plans/workflows/minimal.plan.json",
        "orphan:  plans/workflows/evil.plan.json",
    ]


# -- akmc diff --rev ---------------------------------------------------------------------------


@pytest.fixture
def repo(ws: Path) -> Path:
    return committed(ws)


def test_diff_rev_shows_a_plan_no_source_accounts_for(repo: Path) -> None:
    minimal = json.loads((repo / "plans" / "workflows" / "minimal.plan.json").read_text())["plan"]
    (repo / "plans" / "workflows" / "evil.plan.json").write_text(render_file({**minimal, "ref": "workflows/evil"}))
    result = run_cli("diff", "--rev", "HEAD", cwd=repo)
    assert result.returncode == 1, result.stderr
    assert "plans/workflows/evil.plan.json" in result.stdout
    markdown = run_cli("diff", "--rev", "HEAD", "--format", "markdown", cwd=repo)
    assert "plans/workflows/evil.plan.json" in markdown.stdout
    document = json.loads(run_cli("diff", "--rev", "HEAD", "--format", "json", cwd=repo).stdout)
    assert not document["equal"]


def test_diff_rev_shows_a_committed_plan_edited_without_its_source(repo: Path) -> None:
    target = repo / "plans" / "workflows" / "minimal.plan.json"
    edited = json.loads(target.read_text())["plan"]
    edited["limits"]["concurrency"] = 63
    target.write_text(render_file(edited))
    result = run_cli("diff", "--rev", "HEAD", cwd=repo)
    assert result.returncode == 1 and "plans/workflows/minimal.plan.json" in result.stdout


def test_diff_rev_stays_equal_when_plans_match_their_sources(repo: Path) -> None:
    result = run_cli("diff", "--rev", "HEAD", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_fifo_in_place_of_a_plan_is_stale_or_orphan_and_never_read(ws: Path) -> None:
    os.mkfifo(ws / "plans" / "workflows" / "evil.plan.json")
    (ws / "plans" / "workflows" / "minimal.plan.json").unlink()
    os.mkfifo(ws / "plans" / "workflows" / "minimal.plan.json")
    assert _check(ws).stdout.splitlines() == [
        "stale:   plans/workflows/minimal.plan.json",
        "orphan:  plans/workflows/evil.plan.json",
    ]


def test_diff_rev_never_opens_a_fifo_named_like_a_plan(repo: Path) -> None:
    os.mkfifo(repo / "plans" / "workflows" / "evil.plan.json")
    result = run_cli("diff", "--rev", "HEAD", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
