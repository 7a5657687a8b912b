"""`akmc fmt` as a command: in place, `--check`, `--diff`, stdin, and what it refuses to touch."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from akmc.formatter import format_source
from helpers import DATA, run_cli

MESSY = (DATA / "fmt" / "messy.akm").read_text(encoding="utf-8")


def test_fmt_rewrites_in_place_and_reports(tmp_path: Path) -> None:
    (tmp_path / "a.akm").write_text(MESSY)
    (tmp_path / "b.akm").write_text(format_source(MESSY).text)
    os.chmod(tmp_path / "a.akm", 0o640)
    run = run_cli("fmt", ".", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "1 file reformatted, 1 left unchanged" in run.stderr
    assert (tmp_path / "a.akm").read_text() == format_source(MESSY).text
    assert stat.S_IMODE((tmp_path / "a.akm").stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left behind
    again = run_cli("fmt", "--check", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == ""


def test_fmt_check_and_diff_write_nothing_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "a.akm").write_text(MESSY)
    check = run_cli("fmt", "--check", "a.akm", cwd=tmp_path)
    assert check.returncode == 1 and check.stdout == "would reformat a.akm\n"
    diff = run_cli("fmt", "--diff", "a.akm", cwd=tmp_path)
    assert diff.returncode == 1 and diff.stdout.startswith("--- a.akm\n+++ a.akm\n@@")
    assert (tmp_path / "a.akm").read_text() == MESSY


def test_fmt_stdin_to_stdout() -> None:
    run = run_cli("fmt", "-", stdin=MESSY)
    assert run.returncode == 0 and run.stdout == format_source(MESSY).text
    assert run_cli("fmt", "-", "--check", stdin=MESSY).returncode == 1
    assert run_cli("fmt", "-", "--check", stdin=run.stdout).returncode == 0


def test_fmt_refuses_a_syntax_error_and_leaves_the_file_untouched(tmp_path: Path) -> None:
    broken = 'workflow "w" {\n  step a { shell "x"\n'
    (tmp_path / "bad.akm").write_text(broken)
    (tmp_path / "good.akm").write_text(MESSY)
    before = (tmp_path / "bad.akm").stat()
    run = run_cli("fmt", ".", cwd=tmp_path)
    assert run.returncode == 2
    assert "bad.akm:2:" in run.stderr and "error[E100]" in run.stderr and "not formatted" in run.stderr
    assert (tmp_path / "bad.akm").read_text() == broken and (
        tmp_path / "bad.akm"
    ).stat().st_mtime_ns == before.st_mtime_ns
    assert (tmp_path / "good.akm").read_text() == format_source(MESSY).text  # the others are still formatted


def test_fmt_refuses_what_is_not_a_source(tmp_path: Path) -> None:
    (tmp_path / "latin1.akm").write_bytes(b'workflow "caf\xe9" {}\n')
    (tmp_path / "huge.akm").write_bytes(b"#" * (1024 * 1024 + 1))
    run = run_cli("fmt", ".", cwd=tmp_path)
    assert run.returncode == 2 and "not valid UTF-8" in run.stderr and "source size limit" in run.stderr
    assert "Traceback" not in run.stderr
    assert (tmp_path / "latin1.akm").read_bytes() == b'workflow "caf\xe9" {}\n'
    assert run_cli("fmt", "-", stdin="workflow {").returncode == 2
    missing = run_cli("fmt", "nope.akm", cwd=tmp_path)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    (tmp_path / "empty").mkdir()
    assert run_cli("fmt", "empty", cwd=tmp_path).returncode == 2


def test_fmt_through_a_symlink_rewrites_the_file_and_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "real.akm").write_text(MESSY)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "link.akm").symlink_to(tmp_path / "real.akm")
    assert run_cli("fmt", "sub/link.akm", cwd=tmp_path).returncode == 0
    assert (tmp_path / "sub" / "link.akm").is_symlink()
    assert (tmp_path / "real.akm").read_text() == format_source(MESSY).text
