"""`akmc check` writes its report file by file while it checks: the bytes must be exactly those of
one session checking every file and printing the sorted report at the end, whatever the shares,
the workers, the cache, errors, a worker that dies, an interrupt or a reader that goes away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from akmc.commands import check
from akmc.compiler import Session
from akmc.diagnostics import Diagnostic
from akmc.render import github, text
from akmc.workspace import discover
from helpers import many_workflows

pytestmark = pytest.mark.slow


def _workspace(root: Path, count: int) -> None:
    """`many_workflows` with errors, trees, a file that does not parse, a child outside the named
    directory (composed with a comment and an escape between `uses` and its ref), and a cycle."""
    many_workflows(root, count)
    (root / "lib").mkdir()
    (root / "lib" / "shared.akm").write_text(
        'workflow "shared" {\n  step s {\n    shell "true"\n    inputs = [steps.nope.output]\n  }\n}\n'
    )
    (root / "workflows" / "a_uses_lib.akm").write_text(
        'workflow "a" {\n  step c {\n    uses # the library\n      "lib/sh\\u0061red"\n  }\n}\n'
    )
    (root / "workflows" / "broken.akm").write_text('workflow "broken" {\n  step {\n}\n')
    (root / "workflows" / "cycle_a.akm").write_text(
        'workflow "ca" {\n  step c {\n    uses "workflows/cycle_b"\n  }\n}\n'
    )
    (root / "workflows" / "cycle_b.akm").write_text(
        'workflow "cb" {\n  step c {\n    uses "workflows/cycle_a"\n  }\n}\n'
    )


def _reference(root: Path, output_format: str = "text") -> str:
    """The report as one session checking every file, sorted once at the end, renders it."""
    session = Session(root)
    for path in discover([root / "workflows"]):
        session.check(path)
    results = session.results
    diagnostics = sorted((d for r in results for d in r.report.diagnostics), key=Diagnostic.sort_key)
    if output_format == "github":
        return github.render(diagnostics)
    sources = {r.display: r.text for r in results if r.text is not None}
    return text.render(diagnostics, sources, len(results))


def _cli(root: Path, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "akmc", "check", "workflows", *args]
    return subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=300, **options)


@pytest.mark.parametrize("output_format", ["text", "github"])
def test_a_large_workspace_reads_the_same_as_one_sorted_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output_format: str
) -> None:
    _workspace(tmp_path, 500)  # more than two shares of SHARE_FILES
    monkeypatch.chdir(tmp_path)
    expected = _reference(tmp_path, output_format)
    assert "lib/shared.akm" in expected and "workflows/broken.akm" in expected and "cycle" in expected
    for args in (["-j2", "--no-cache"], ["-j1", "--no-cache"], ["-j2"], ["-j2"]):  # cold, then cold
        done = _cli(tmp_path, "--format", output_format, *args)  # filling the cache, then warm
        assert done.returncode == 1, done.stderr
        assert done.stdout == expected, args
        assert "Traceback" not in done.stderr


_WORK = check._work
_DEATH: dict[str, Any] = {}  # the marker file, and whether a worker dies only once


def _dying(job: tuple[Path, bool, list[Path]]) -> Any:
    """`_work`, except that it ends its worker process abruptly on the share holding w7.akm (only
    the first time when `once`, so the retry succeeds). Module level: the pool pickles it by name."""
    marker: Path = _DEATH["marker"]
    if any(p.name == "w7.akm" for p in job[2]) and not (_DEATH["once"] and marker.exists()):
        marker.touch()
        os._exit(9)
    return _WORK(job)


def _die_in(marker: Path, once: bool) -> Any:
    _DEATH.update(marker=marker, once=once)
    return _dying


def _in_process(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    jobs: int,
    **patches: Any,
) -> tuple[int, str, str, str]:
    """(exit code, stdout, stderr, the reference report) of a check in shares of 7 files, with
    `patches` applied to the check module."""
    _workspace(tmp_path, 60)
    monkeypatch.chdir(tmp_path)
    expected = _reference(tmp_path)
    monkeypatch.setattr(check, "SHARE_FILES", 7)
    for name, value in patches.items():
        monkeypatch.setattr(check, name, value)
    code = check.run([Path("workflows")], cache=False, jobs=jobs)
    out, err = capsys.readouterr()
    return code, out, err, expected


def test_a_worker_that_dies_once_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dying = _die_in(tmp_path / "died", once=True)
    assert _in_process(tmp_path, monkeypatch, capsys, 2, _work=dying) == (
        1,
        _reference(tmp_path),
        "",
        _reference(tmp_path),
    )
    assert (tmp_path / "died").exists()


def test_a_share_that_kills_its_worker_is_an_error_and_the_rest_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err, _ = _in_process(tmp_path, monkeypatch, capsys, 2, _work=_die_in(tmp_path / "died", once=False))
    assert code == 2
    assert "akmc: error: a worker process died while checking" in err and "their results are missing" in err
    assert "Traceback" not in err
    reported = {line.split(":")[0] for line in out.splitlines() if line.startswith("workflows/")}
    assert "workflows/w5.akm" in reported and "workflows/w55.akm" in reported  # before and after it
    assert out.endswith("\n") and "files checked)." in out.splitlines()[-1]


class _Blind(check._Checker):
    def _reach(self, files: list[Path]) -> set[str]:
        return set()  # expects nothing: every result arrives unannounced


def test_a_child_the_text_scan_misses_is_still_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As if files changed between planning and checking to compose ones nobody expected.
    code, out, _, expected = _in_process(tmp_path, monkeypatch, capsys, 1, _Checker=_Blind)
    assert (code, out) == (1, expected)


def test_sigint_stops_after_a_whole_line_with_exit_130(tmp_path: Path) -> None:
    _workspace(tmp_path, 1200)
    process = subprocess.Popen(
        [sys.executable, "-m", "akmc", "check", "workflows", "--no-cache", "-j2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # Python honours a SIGINT ignored by whoever started it (a background job of a shell): the
        # check is interrupted as from a terminal, whatever started the suite.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdout is not None
    first = process.stdout.readline()  # the report has started: shares are still being checked
    assert first.startswith(b"lib/shared.akm:")
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=120)
    assert process.returncode == 130
    assert (first + rest).endswith(b"\n")
    assert b"akmc: interrupted" in err and b"Traceback" not in err
    assert b"files checked)" not in rest  # stopped before the end


def test_a_reader_that_goes_away_ends_the_check_quietly(tmp_path: Path) -> None:
    _workspace(tmp_path, 300)
    # Far more output than a pipe holds (64 KiB), sorted after the first line: the check is still
    # writing when the reader has gone, however the processes are scheduled.
    inputs = ", ".join(f"steps.missing{i}.output" for i in range(40))
    for n in range(10):  # 40 errors each, about 0.6 MiB in all
        (tmp_path / "workflows" / f"zz{n}.akm").write_text(
            f'workflow "zz{n}" {{\n  step s {{\n    shell "true"\n    inputs = [{inputs}]\n  }}\n}}\n'
        )
    done = subprocess.run(
        f"{sys.executable} -m akmc check workflows --no-cache -j2 | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.startswith("lib/shared.akm:") and done.stdout.count("\n") == 1
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert done.returncode == 141


def test_an_edited_file_in_a_cycle_reads_as_a_cold_check(tmp_path: Path) -> None:
    _workspace(tmp_path, 30)
    assert _cli(tmp_path).returncode == 1  # fills the cache and the uses index
    target = tmp_path / "workflows" / "cycle_a.akm"
    target.write_text(target.read_text().replace('"ca"', '"ca edited"'))
    argv = [sys.executable, "-m", "akmc", "check", "workflows/cycle_a.akm"]
    warm = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    cold = subprocess.run([*argv, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert "workflows/cycle_a.akm" in warm.stdout and "workflows/cycle_b.akm" in warm.stdout


def test_a_workflow_that_starts_composing_the_edited_file_is_found_as_its_parent(tmp_path: Path) -> None:
    # The uses index read by the last check is stale for w3: its size and time changed since.
    _workspace(tmp_path, 30)
    assert _cli(tmp_path).returncode == 1
    parent = tmp_path / "workflows" / "w3.akm"
    parent.write_text(parent.read_text().removesuffix("}\n") + '  step late {\n    uses "workflows/w4"\n  }\n}\n')
    child = tmp_path / "workflows" / "w4.akm"
    child.write_text(child.read_text().replace('shell "true"', 'shell "true"\n    timeout = 0s'))
    argv = [sys.executable, "-m", "akmc", "check", "workflows/w4.akm"]
    warm = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    cold = subprocess.run([*argv, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert warm.stdout == cold.stdout
    assert "(2 files checked)" in warm.stdout  # w4 and the parent that now composes it
