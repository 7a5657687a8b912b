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


def test_shares_follow_the_sorted_files_and_keep_each_composition_tree_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    many_workflows(tmp_path)
    (tmp_path / "workflows" / "w2.akm").write_text('workflow "w2" {\n  step c {\n    uses "workflows/w39"\n  }\n}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(check, "SHARE_FILES", 6)
    files = sorted(Path("workflows").glob("*.akm"))
    checker = check._Checker(tmp_path, True, None, 2, CheckConfig())
    out = Output("text", None)
    checker.plan(files, out)
    out.start()
    monkeypatch.setattr(checker, "_in_shares", lambda out: True)  # cut the shares, check nothing
    checker.run(out)
    shares = [[p.name for p in share] for _, share in checker.shares]
    assert sorted(p for share in shares for p in share) == sorted(p.name for p in files)
    where = {name: i for i, share in enumerate(shares) for name in share}
    for parent, child in [("w0", "w1"), ("w7", "w8"), ("w35", "w36"), ("w2", "w39")]:
        assert where[f"{parent}.akm"] == where[f"{child}.akm"]  # a tree in one share
    firsts = [share[0] for share in shares]
    assert firsts == sorted(firsts, key=lambda n: f"workflows/{n}")  # taken in sorted order
    assert shares[2][:2] == ["w2.akm", "w39.akm"]  # w39 sorts last but comes with its parent
    # the pass over the cache (output share 0) and w2's share may produce w39
    assert out.owners["workflows/w39.akm"] == {0, 3}


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
