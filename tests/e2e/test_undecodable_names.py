"""A workflow file whose name is not UTF-8 (bytes a Linux file name may hold): E501 naming it
escaped, in every command, never an internal error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli, source

NAME = b"workflows/\xff.akm"
SHOWN = "workflows/\\xff.akm"
WORKFLOW = source("""
    workflow "w" {
      step s { shell "echo hi" }
    }
""")

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "ok.akm").write_text(WORKFLOW)
    with open(os.path.join(os.fsencode(tmp_path), NAME), "wb") as handle:
        handle.write(WORKFLOW.encode())
    return tmp_path


def _named() -> str:
    return os.fsdecode(NAME)


def _clean(result: subprocess.CompletedProcess[str]) -> str:
    out = result.stdout + result.stderr
    assert "internal error" not in out and "Traceback" not in out, out
    assert result.returncode not in (70,), out
    return out


@pytest.mark.parametrize(
    "args",
    [
        ("check",),
        ("check", "workflows"),
        ("check", "--format", "json"),
        ("check", "--format", "sarif"),
        ("check", "--format", "github"),
        ("compile", "workflows", "--out-dir", "plans"),
        ("compile", "workflows", "--out-dir", "plans", "--check"),
        ("compile", "@NAME"),
        ("plan", "@NAME"),
        ("graph", "@NAME"),
    ],
)
def test_every_command_reports_e501_with_the_name_escaped(ws: Path, args: tuple[str, ...]) -> None:
    result = run_cli(*[_named() if a == "@NAME" else a for a in args], cwd=ws)
    out = _clean(result)
    assert result.returncode == 1, out
    assert "E501" in out and SHOWN in out.replace("\\\\", "\\"), out


@pytest.mark.parametrize("args", [("fmt", "workflows"), ("fmt", "--diff", "workflows"), ("fmt", "--check", "@NAME")])
def test_fmt_names_the_file_escaped(ws: Path, args: tuple[str, ...]) -> None:
    (ws / "workflows" / "ok.akm").unlink()
    with open(os.path.join(os.fsencode(ws), NAME), "wb") as handle:
        handle.write(b'workflow "w" {\n step s { shell "echo hi" }\n}\n')
    result = run_cli(*[_named() if a == "@NAME" else a for a in args], cwd=ws)
    out = _clean(result)
    assert result.returncode in (0, 1) and (SHOWN in out or args == ("fmt", "workflows")), out


def test_diff_rev_reports_e501_for_either_side(ws: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "add", "-A")
    git("-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-qm", "base")
    result = run_cli("diff", "--rev", "HEAD", cwd=ws)
    out = _clean(result)
    assert result.returncode == 2 and "E501" in out and SHOWN in out, out
