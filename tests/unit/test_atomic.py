"""Atomic writes (akm_run.atomic), which plan files, signatures and cache entries go through."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from akm_run.atomic import write_atomically


def test_an_atomic_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old")
    write_atomically(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_concurrent_atomic_writers_never_share_a_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    payloads = [bytes([65 + i]) * 200_000 for i in range(8)]
    errors: list[BaseException] = []

    def write(data: bytes) -> None:
        try:
            for _ in range(5):
                write_atomically(target, data)
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() in payloads  # one writer's bytes, whole
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_an_atomic_write_that_fails_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "is-a-directory"
    target.mkdir()
    with pytest.raises(OSError):
        write_atomically(target, "x")
    assert [p.name for p in tmp_path.iterdir()] == ["is-a-directory"]


def test_an_atomic_write_creates_the_file_as_the_umask_says(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        write_atomically(tmp_path / "a", "x")
        write_atomically(tmp_path / "b", "x", mode=0o600)
    finally:
        os.umask(previous)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "b").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("name", ["w" * 250 + ".json", "é" * 122 + ".json"], ids=["ascii", "two-byte"])
def test_a_target_with_the_longest_name_the_file_system_allows_is_written(tmp_path: Path, name: str) -> None:
    """The temporary file's name stays within the file system's 255 bytes whatever the target's
    name (`akmc compile` of a long-named workflow wrote its plan file before temporary names grew)."""
    assert len(name.encode()) <= 255
    write_atomically(tmp_path / name, "x")
    assert (tmp_path / name).read_text() == "x"
    assert [p.name for p in tmp_path.iterdir()] == [name]
