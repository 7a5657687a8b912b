"""`akmc check` and `akmc explain` as real subprocesses: exit codes, formats, robustness."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from akmc.diagnostics import CATALOG
from akmc.workspace import MAX_SOURCE_BYTES
from helpers import Checker, run_cli, source

GOOD = source("""
    workflow "ok" {
      step build {
        shell "make"
      }
    }
""")
BAD = 'workflow "bad" {\n  step build {\n    shell "make"\n'


def test_clean_tree_exits_zero(workspace: Path) -> None:
    (workspace / "a.akm").write_text(GOOD)
    result = run_cli("check", cwd=workspace)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "No problems found (1 file checked).\n"


def test_errors_exit_one_with_position_and_caret(workspace: Path) -> None:
    (workspace / "wf").mkdir()
    (workspace / "wf" / "bad.akm").write_text(BAD)
    (workspace / "wf" / "good.akm").write_text(GOOD)
    result = run_cli("check", "wf", cwd=workspace)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("wf/bad.akm:3:17: error[E100]: unexpected end of file")
    assert lines[2] == '3 |     shell "make"'
    assert lines[3] == "  |                 ^"
    assert lines[-1] == "Found 1 error in 1 file (2 files checked)."


def test_json_format(workspace: Path) -> None:
    (workspace / "bad.akm").write_text(BAD)
    result = run_cli("check", "--format", "json", "bad.akm", cwd=workspace)
    assert result.returncode == 1
    [entry] = json.loads(result.stdout)
    assert entry["code"] == "E100" and (entry["line"], entry["column"]) == (3, 17)
    assert entry["severity"] == "error" and entry["file"] == "bad.akm"


def test_quiet_prints_only_diagnostics(workspace: Path) -> None:
    (workspace / "a.akm").write_text(GOOD)
    result = run_cli("check", "-q", cwd=workspace)
    assert (result.returncode, result.stdout) == (0, "")


def test_usage_error_exits_two(workspace: Path) -> None:
    result = run_cli("check", "--format", "yaml", cwd=workspace)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_missing_path_exits_two_without_traceback(workspace: Path) -> None:
    result = run_cli("check", "nope.akm", cwd=workspace)
    assert result.returncode == 2
    assert "akmc: error: nope.akm: no such file or directory" in result.stderr and "Traceback" not in result.stderr
    assert "No problems found" not in result.stdout + result.stderr


def test_a_missing_path_beside_a_clean_one_still_fails_and_claims_nothing(workspace: Path) -> None:
    (workspace / "ok.akm").write_text('workflow "w" {\n  step a { shell "x" }\n}\n')
    result = run_cli("check", "ok.akm", "missing/dir", cwd=workspace)
    assert result.returncode == 2
    assert "akmc: error: missing/dir: no such file or directory" in result.stderr
    assert "No problems found" not in result.stdout + result.stderr


def test_a_directory_without_sources_exits_two(workspace: Path) -> None:
    (workspace / "empty" / "deeper").mkdir(parents=True)
    (workspace / "empty" / "notes.txt").write_text("not a workflow")
    for args in (["empty"], []):
        cwd = workspace if args else workspace / "empty"
        result = run_cli("check", *args, cwd=cwd)
        assert result.returncode == 2, args
        assert "no .akm files" in result.stderr, result.stderr
        assert "No problems found" not in result.stdout + result.stderr


def test_directory_named_like_a_source_is_skipped_when_walking(workspace: Path) -> None:
    (workspace / "x.akm").mkdir()
    (workspace / "x.akm" / "inner.akm").write_text(GOOD)
    result = run_cli("check", ".", cwd=workspace)
    assert result.returncode == 0 and "1 file checked" in result.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_exits_two(workspace: Path) -> None:
    path = workspace / "secret.akm"
    path.write_text(GOOD)
    path.chmod(0)
    result = run_cli("check", "secret.akm", cwd=workspace)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_dangling_symlink_is_reported_not_raised(workspace: Path) -> None:
    (workspace / "gone.akm").symlink_to(workspace / "missing-target.akm")
    result = run_cli("check", "gone.akm", cwd=workspace)
    assert result.returncode == 2 and "cannot read gone.akm" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"\xff\xfe\x00garbage", "E103"),
        (b"#" * (MAX_SOURCE_BYTES + 1), "E103"),
        (b"", "E100"),
        (b"workflow " + b"{" * 100_000, "E100"),
    ],
    ids=["not-utf8", "over-1MiB", "empty", "deep-braces"],
)
def test_hostile_files_get_one_diagnostic(workspace: Path, content: bytes, code: str) -> None:
    (workspace / "x.akm").write_bytes(content)
    result = run_cli("check", "--format", "json", "x.akm", cwd=workspace)
    assert result.returncode == 1, result.stderr
    assert [d["code"] for d in json.loads(result.stdout)] == [code]
    assert "Traceback" not in result.stderr


def test_explain_prints_the_page() -> None:
    result = run_cli("explain", "e203")
    assert result.returncode == 0
    assert result.stdout.startswith("# E203: reference to an unknown step")


def test_explain_without_a_code_lists_every_code_with_its_summary() -> None:
    result = run_cli("explain")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines if line[:1] in ("E", "W")] == sorted(CATALOG)
    for code, entry in CATALOG.items():
        assert any(line.startswith(code) and line.endswith(entry.summary) for line in lines), code
    assert "akmc explain CODE" in result.stdout


def test_explain_unknown_code() -> None:
    result = run_cli("explain", "E999")
    assert result.returncode == 2 and "unknown diagnostic code" in result.stderr


def test_version_and_help() -> None:
    assert run_cli("--version").stdout.startswith("akmc ")
    help_text = run_cli("check", "--help").stdout
    assert "examples:\n  akmc check" in help_text and "--format" in help_text


def test_each_file_belongs_to_its_own_workspace(tmp_path: Path) -> None:
    """Two akm.toml workspaces below one directory: refs resolve, and configuration applies, per workspace."""
    child = source("""
        workflow "c" {
          params {
            unused: bool = false
          }
          step s {
            shell "true"
          }
        }
    """)
    parent = source("""
        workflow "p" {
          step c {
            uses "workflows/c"
          }
        }
    """)
    for name, toml in (("a", '[check]\nignore = ["W700"]\n'), ("b", "")):
        (tmp_path / name / "workflows").mkdir(parents=True)
        (tmp_path / name / "akm.toml").write_text(toml)
        (tmp_path / name / "workflows" / "c.akm").write_text(child)
        (tmp_path / name / "workflows" / "p.akm").write_text(parent)
    result = run_cli("check", "--format", "json", ".", cwd=tmp_path)
    found = [(d["file"], d["code"]) for d in json.loads(result.stdout)]
    assert found == [("b/workflows/c.akm", "W700")], result.stderr
    assert "(4 files checked)" in run_cli("check", ".", cwd=tmp_path).stdout


def test_a_fifo_named_on_the_command_line_is_an_error_not_a_hang(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text("")
    os.mkfifo(tmp_path / "pipe.akm")
    result = run_cli("check", "pipe.akm", cwd=tmp_path)  # run_cli's timeout fails the test on a hang
    assert result.returncode == 2 and "cannot read pipe.akm: not a regular file" in result.stderr
    assert "internal error" not in result.stderr
    (tmp_path / "wf.akm").write_text('workflow "w" {\n  step a { shell "x" }\n}\n')
    checked = run_cli("check", ".", cwd=tmp_path)  # discovery skips it
    assert checked.returncode == 0, checked.stderr


def test_symlink_loops_and_fifos_inside_a_workflow_are_e500_or_e400(tmp_path: Path) -> None:
    codes = Checker(tmp_path)
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "child.akm").symlink_to("child.akm")
    os.mkfifo(tmp_path / "prompt.md")
    src = 'workflow "w" {\n  step a { script "loop1" }\n  step b { agent file("prompt.md") }\n'
    src += '  step c { uses "child" }\n}\n'
    assert sorted(codes(src)) == ["E400@4", "E500@2", "E500@3"]
    (tmp_path / "self.akm").symlink_to("self.akm")
    result = run_cli("check", "self.akm", cwd=tmp_path)
    assert result.returncode == 2 and "cannot read self.akm" in result.stderr and "internal" not in result.stderr
