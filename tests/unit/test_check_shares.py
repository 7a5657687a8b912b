"""Checking many files a share at a time, each share in a session of its own, answers exactly as
one session checking them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from akmc.commands import check
from akmc.config import CheckConfig
from akmc.render.stream import Output
from helpers import many_workflows


def _check(capsys: pytest.CaptureFixture[str], jobs: int) -> tuple[int, str]:
    code = check.run([Path("workflows")], cache=False, jobs=jobs)
    return code, capsys.readouterr().out


def test_small_shares_answer_as_one_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    many_workflows(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(check, "PARALLEL_THRESHOLD", 10**6)
    one_session = _check(capsys, jobs=1)
    monkeypatch.setattr(check, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(check, "SHARE_FILES", 3)
    assert _check(capsys, jobs=1) == one_session
    assert _check(capsys, jobs=2) == one_session
    assert one_session[0] == 1 and "E2" in one_session[1] and "(40 files checked)" in one_session[1]


def test_shares_are_cut_in_sorted_file_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    many_workflows(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(check, "SHARE_FILES", 6)
    files = sorted(Path("workflows").glob("*.akm"))
    checker = check._Checker(tmp_path, True, None, 2, CheckConfig())
    out = Output("text", None)
    checker.plan(files, out)
    out.start()
    monkeypatch.setattr(checker, "_in_shares", lambda out: True)  # cut the shares, check nothing
    checker.run(out)
    shares = [share for _, share in checker.shares]
    assert len(shares) == 7
    names = [p.as_posix() for share in shares for p in share]
    assert names == sorted(p.as_posix() for p in files)  # consecutive runs of the sorted files
    # each share expects its files and the children they compose: w35 (fifth share) composes w36;
    # the pass over the cache (number 0) expected every file
    assert out.owners["workflows/w36.akm"] == {0, 5, 6}
    assert out.owners["workflows/w35.akm"] == {0, 5}


@pytest.mark.parametrize("output_format", check.FORMATS)
def test_every_format_reads_the_same_from_shares_workers_and_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, output_format: str
) -> None:
    # Records keep only the source lines their diagnostics show; a cached record rebuilds them from
    # the file. Neither may change a byte of any format's sorted report.
    many_workflows(tmp_path)
    monkeypatch.chdir(tmp_path)

    def report(jobs: int, cache: bool) -> tuple[int, str]:
        code = check.run([Path("workflows")], output_format=output_format, cache=cache, jobs=jobs)
        return code, capsys.readouterr().out

    monkeypatch.setattr(check, "PARALLEL_THRESHOLD", 10**6)
    one_session = report(jobs=1, cache=False)
    monkeypatch.setattr(check, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(check, "SHARE_FILES", 3)
    assert report(jobs=2, cache=True) == one_session  # cold, fills the cache
    assert report(jobs=1, cache=True) == one_session  # every result from the cache
    assert one_session[0] == 1 and "E2" in one_session[1]
