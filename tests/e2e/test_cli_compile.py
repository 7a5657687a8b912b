"""`akmc compile`, `verify`, `plan`, `hash` and `schema` as real subprocesses; determinism of plan bytes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from akm_run.plan import plan_hash
from helpers import REPO, run_cli

CORPUS = REPO / "golden" / "corpus"


def test_compile_to_stdout_and_file(tmp_path: Path) -> None:
    out = run_cli("compile", "workflows/minimal.akm", cwd=CORPUS)
    assert out.returncode == 0
    assert out.stdout == (CORPUS / "plans" / "workflows" / "minimal.plan.json").read_text()
    target = tmp_path / "m.plan.json"
    assert run_cli("compile", "workflows/minimal.akm", "-o", target, cwd=CORPUS).returncode == 0
    assert target.read_text() == out.stdout


def test_same_bytes_in_any_directory_and_hash_seed(tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(CORPUS, copy)
    first = run_cli("compile", "workflows/everything.akm", cwd=CORPUS).stdout
    second = run_cli("compile", str(copy / "workflows" / "everything.akm"), cwd=tmp_path).stdout
    assert first == second and first
    assert str(tmp_path) not in second and str(REPO) not in first


def test_compile_check_reports_stale_and_missing(tmp_path: Path) -> None:
    shutil.copytree(CORPUS, tmp_path / "ws")
    ws = tmp_path / "ws"
    (ws / "plans" / "workflows" / "minimal.plan.json").unlink()
    (ws / "workflows" / "everything.akm").write_text(
        (ws / "workflows" / "everything.akm").read_text().replace('"Ship it?"', '"Ship it now?"')
    )
    result = run_cli("compile", "workflows", "--out-dir", "plans", "--check", cwd=ws)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "stale:   plans/workflows/everything.plan.json",
        "missing: plans/workflows/minimal.plan.json",
    ]
    assert "run `akmc compile workflows --out-dir plans` to refresh" in result.stderr
    assert run_cli("compile", "workflows", "--out-dir", "plans", cwd=ws).returncode == 0
    assert run_cli("compile", "workflows", "--out-dir", "plans", "--check", cwd=ws).returncode == 0


def test_compile_check_prints_the_exact_command_that_refreshes(tmp_path: Path) -> None:
    """The command printed is the one to run, paths and options as given (quoted for a shell)."""
    shutil.copytree(CORPUS, tmp_path / "ws")
    ws = tmp_path / "ws"
    (ws / "my plans").mkdir()
    result = run_cli("compile", "./workflows/", "--out-dir", "my plans", "--check", "--root", ".", cwd=ws)
    assert result.returncode == 1
    assert "run `akmc compile workflows --out-dir 'my plans' --root .` to refresh" in result.stderr
    one = run_cli("compile", "workflows/minimal.akm", "-o", "min.plan.json", "--check", cwd=ws)
    assert one.returncode == 1
    assert "run `akmc compile workflows/minimal.akm -o min.plan.json` to refresh" in one.stderr
    assert run_cli("compile", "workflows/minimal.akm", "-o", "min.plan.json", cwd=ws).returncode == 0
    assert run_cli("compile", "workflows/minimal.akm", "-o", "min.plan.json", "--check", cwd=ws).returncode == 0


def test_compile_errors_exit_one_with_diagnostics_on_stderr(workspace: Path) -> None:
    (workspace / "bad.akm").write_text(
        'workflow "w" {\n  step a {\n    shell "x"\n    inputs = [steps.b.output]\n  }\n}\n'
    )
    result = run_cli("compile", "bad.akm", cwd=workspace)
    assert result.returncode == 1 and result.stdout == ""
    assert "error[E203]" in result.stderr


def test_plan_summary_and_json() -> None:
    text = run_cli("plan", "workflows/everything.akm", "--summary", cwd=CORPUS)
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0] == 'workflow: workflows/everything  "Everything"'
    assert '  3. pick     [route]  params.mode: "fast" -> quick, "safe" -> careful' in lines
    assert lines[-4:] == [
        "  prompts/review.md",
        "  scripts/check.sh",
        "  scripts/collect.sh",
        "  workflows/everything.akm",
    ]
    assert "PUBLISH_TOKEN)" in text.stdout
    assert "publish.sh" not in text.stdout and "Do it carefully" not in text.stdout  # no bodies
    full = run_cli("plan", "workflows/everything.akm", "--format", "json", cwd=CORPUS)
    assert json.loads(full.stdout)["plan"]["ref"] == "workflows/everything"


def test_hash_of_source_and_plan_agree() -> None:
    source = run_cli("hash", "workflows/everything.akm", cwd=CORPUS).stdout.strip()
    plan = run_cli("hash", "plans/workflows/everything.plan.json", cwd=CORPUS).stdout.strip()
    assert source == plan and source.startswith("sha256:")


def test_schema_is_json_schema() -> None:
    result = run_cli("schema")
    document = json.loads(result.stdout)
    assert document["$schema"].endswith("2020-12/schema") and "plan" in document["properties"]


def test_committed_plans_are_up_to_date() -> None:
    result = run_cli("compile", "workflows", "--out-dir", "plans", "--check", cwd=CORPUS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_akmc_verify_exit_codes(tmp_path: Path) -> None:
    golden = CORPUS / "plans" / "workflows" / "everything.plan.json"
    assert run_cli("verify", golden).returncode == 0
    document = json.loads(golden.read_text())
    document["plan"]["steps"][0]["foo"] = 1
    document["planHash"] = plan_hash(document["plan"])  # re-hashed, so only the unknown key is under test
    bad = tmp_path / "bad.plan.json"
    bad.write_bytes(json.dumps(document).encode())
    result = run_cli("verify", bad)
    assert result.returncode == 4
    assert 'plan.steps[0].foo: unknown key "foo"' in result.stderr and "Traceback" not in result.stderr


def test_the_real_commands_agree_on_a_checked_file(tmp_path: Path) -> None:
    """`akmc check` exit 0 → `akmc compile` exit 0 → `akmc verify` exit 0, as real subprocesses."""
    shutil.copytree(REPO / "golden" / "corpus", tmp_path / "ws")
    ws = tmp_path / "ws"
    for path in sorted((ws / "workflows").glob("*.akm")):
        rel = path.relative_to(ws).as_posix()
        assert run_cli("check", "-q", rel, cwd=ws).returncode == 0
        assert run_cli("compile", rel, "-o", "out.plan.json", cwd=ws).returncode == 0
        assert run_cli("verify", "out.plan.json", cwd=ws).returncode == 0


def test_a_file_with_out_dir_writes_the_plan_that_check_compares(tmp_path: Path) -> None:
    """`akmc compile FILE --out-dir D` writes D/<ref>.plan.json, the file `--check` compares, and
    prints nothing: a plan printed to the terminal while the directory stays stale would pass
    for a compiled one."""
    shutil.copytree(CORPUS, tmp_path / "ws")
    ws = tmp_path / "ws"
    shutil.rmtree(ws / "plans")
    result = run_cli("compile", "workflows/minimal.akm", "--out-dir", "plans", cwd=ws)
    assert result.returncode == 0 and result.stdout == ""
    assert (ws / "plans" / "workflows" / "minimal.plan.json").read_text() == run_cli(
        "compile", "workflows/minimal.akm", cwd=ws
    ).stdout
    assert run_cli("compile", "workflows/minimal.akm", "--out-dir", "plans", "--check", cwd=ws).returncode == 0


def test_output_and_out_dir_together_are_a_usage_error(tmp_path: Path) -> None:
    shutil.copytree(CORPUS, tmp_path / "ws")
    result = run_cli("compile", "workflows/minimal.akm", "-o", "x.json", "--out-dir", "plans", cwd=tmp_path / "ws")
    assert result.returncode == 2 and result.stderr == "akmc: error: give -o or --out-dir, not both\n"
    assert not (tmp_path / "ws" / "x.json").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["workflows/minimal.akm", "--out-dir", "blocker"],
        ["workflows/minimal.akm", "-o", "blocker/x.json"],
        ["workflows", "--out-dir", "blocker"],
    ],
)
def test_a_plan_path_that_cannot_be_written_is_a_usage_error_naming_it(tmp_path: Path, argv: list[str]) -> None:
    """A file where the plan's directory must be: one `akmc: error:` line naming the path, exit 2,
    never an internal error."""
    shutil.copytree(CORPUS, tmp_path / "ws")
    (tmp_path / "ws" / "blocker").write_text("")
    result = run_cli("compile", *argv, cwd=tmp_path / "ws")
    assert result.returncode == 2
    assert result.stderr.startswith("akmc: error: cannot write blocker/") and "internal error" not in result.stderr
