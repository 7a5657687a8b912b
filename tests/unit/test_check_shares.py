"""Checking many files a share at a time, each share in a session of its own, answers exactly as
one session checking them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from akmc.commands import check
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


def test_shares_keep_each_composition_tree_whole(tmp_path: Path) -> None:
    many_workflows(tmp_path)
    files = sorted((tmp_path / "workflows").glob("*.akm"))
    shares = check._shares(tmp_path, files, 8)
    where = {path.name: i for i, share in enumerate(shares) for path in share}
    for i in range(0, 39, 7):
        assert where[f"w{i}.akm"] == where[f"w{i + 1}.akm"]  # a parent and the child it composes
    assert sorted(p for share in shares for p in share) == files


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
