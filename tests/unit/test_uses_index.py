"""The `uses` index of a workspace: one changed workflow writes one entry, not the whole index."""

from __future__ import annotations

import os
from pathlib import Path

from akmc.cache import UsesIndex


def _scan(root: Path) -> dict[str, list[str]]:
    index = UsesIndex(root)
    with os.scandir(root) as entries:
        found = {Path(e.path).name: index.refs(e) for e in sorted(entries, key=lambda e: e.name) if e.is_file()}
    index.save()
    return found


def _workflow(path: Path, child: str | None, mtime: int) -> None:
    uses = f'  step c {{ uses "{child}" }}\n' if child else ""
    path.write_text(f'workflow "w" {{\n{uses}}}\n')
    os.utime(path, ns=(mtime, mtime))


def test_one_changed_file_is_written_beside_the_index(tmp_path: Path) -> None:
    for i in range(5):
        _workflow(tmp_path / f"w{i}.akm", None, 10**9)
    index = UsesIndex(tmp_path)
    assert _scan(tmp_path) == {f"w{i}.akm": [] for i in range(5)}
    assert index.path.exists() and not index.changes_path.exists()
    whole = index.path.read_bytes()

    _workflow(tmp_path / "w3.akm", "./w1.akm", 2 * 10**9)
    assert _scan(tmp_path)["w3.akm"] == ["./w1.akm"]
    assert index.path.read_bytes() == whole  # not rewritten for one file
    assert list(UsesIndex(tmp_path).changes) == [str(tmp_path.resolve() / "w3.akm")]
    assert _scan(tmp_path)["w3.akm"] == ["./w1.akm"]  # the change is read back


def test_many_changes_fold_into_the_index(tmp_path: Path) -> None:
    for i in range(UsesIndex.FOLD + 2):
        _workflow(tmp_path / f"w{i}.akm", None, 10**9)
    _scan(tmp_path)
    for i in range(UsesIndex.FOLD + 1):
        _workflow(tmp_path / f"w{i}.akm", "./x.akm", 2 * 10**9)
    found = _scan(tmp_path)
    index = UsesIndex(tmp_path)
    assert not index.changes_path.exists()
    assert found["w0.akm"] == ["./x.akm"] and found[f"w{UsesIndex.FOLD + 1}.akm"] == []


def test_a_corrupt_changes_file_is_ignored(tmp_path: Path) -> None:
    _workflow(tmp_path / "w.akm", "./c.akm", 10**9)
    _scan(tmp_path)
    index = UsesIndex(tmp_path)
    index.changes_path.write_text("[not an object")
    assert _scan(tmp_path) == {"w.akm": ["./c.akm"]}
    index.changes_path.write_bytes(b"\xff\xfe")
    assert _scan(tmp_path) == {"w.akm": ["./c.akm"]}
