"""The result cache of `akmc check` and parallel checking: same answers, less work, never stale."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from akm_run.digest import tagged_sha256
from akmc.cache import FORMAT, Cache, fingerprint
from helpers import REPO, many_workflows, run_cli, source

NESTED = REPO / "golden" / "compose" / "nested"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(NESTED, tmp_path / "ws")
    return tmp_path / "ws"


def _check(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("check", "--format", "json", *args, cwd=root)


def _imports(root: Path, *args: str) -> str:
    """The modules `akmc check` imported (python -X importtime), to see whether it parsed anything."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "akmc", "check", *args], cwd=root, capture_output=True, text=True
    )
    return result.stderr


def test_a_warm_check_does_not_parse(tree: Path) -> None:
    assert "akmc.syntax" in _imports(tree)  # cold: parses every file (without Lark: no file has an error)
    assert (tree / ".akmc-cache").is_dir()
    assert "akmc.syntax" not in _imports(tree)  # warm: every result comes from the cache
    assert "akmc.syntax" not in _imports(tree, "workflows/build.akm")  # parents confirmed from the cache too


def test_the_cache_directory_keeps_itself_out_of_git(tree: Path) -> None:
    """Created by a check, it holds a `.gitignore` of `*`: a workspace without one never commits it."""
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    assert _check(tree).returncode == 0
    assert (tree / ".akmc-cache" / ".gitignore").read_text() == "*\n"
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=tree, capture_output=True, text=True, check=True
    ).stdout
    assert status and ".akmc-cache" not in status
    (tree / ".akmc-cache" / ".gitignore").unlink()  # a user's choice once the directory exists
    assert _check(tree).returncode == 0
    assert not (tree / ".akmc-cache" / ".gitignore").exists()


def test_editing_a_child_invalidates_its_parents(tree: Path) -> None:
    assert json.loads(_check(tree).stdout) == []
    build = tree / "workflows" / "build.akm"
    build.write_text(build.read_text().replace("artifact: {", "binary: {"))
    codes = sorted((d["file"], d["code"]) for d in json.loads(_check(tree).stdout))
    assert codes == [("workflows/release.akm", "E408"), ("workflows/stage.akm", "E407")]
    build.write_text(build.read_text().replace("binary: {", "artifact: {"))
    assert json.loads(_check(tree).stdout) == []


def test_scripts_and_absent_files_are_dependencies(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text("")
    src = source("""
        workflow "w" {
          step s {
            script "run.sh"
          }
        }
    """)
    (tmp_path / "w.akm").write_text(src)
    assert [d["code"] for d in json.loads(_check(tmp_path).stdout)] == ["E500"]
    (tmp_path / "run.sh").write_text("echo no shebang\n")
    assert [d["code"] for d in json.loads(_check(tmp_path).stdout)] == ["E502"]
    (tmp_path / "run.sh").write_text("#!/bin/sh\necho\n")
    assert json.loads(_check(tmp_path).stdout) == []


def test_corrupt_and_foreign_entries_are_ignored(tree: Path) -> None:
    expected = _check(tree).stdout
    # one entry per workflow, beside the `uses` index a whole check writes too
    entries = sorted(p for p in (tree / ".akmc-cache" / "v1").glob("*.json") if not p.name.startswith("uses-index"))
    assert len(entries) == 3
    entries[0].write_text("{not json")
    foreign = json.loads(entries[1].read_text())
    foreign["key"][1] = "another-compiler"
    foreign["diagnostics"] = [
        {"code": "E203", "message": "stale", "file": "x", "span": [1, 1, 1, 2, 0, 1], "help": None, "related": []}
    ]
    entries[1].write_text(json.dumps(foreign))
    assert _check(tree).stdout == expected
    assert json.loads(entries[0].read_text())["key"][0] == 1  # rewritten


def test_no_cache_neither_reads_nor_writes(tree: Path) -> None:
    assert _check(tree, "--no-cache").returncode == 0
    assert not (tree / ".akmc-cache").exists()


def test_suppressions_are_part_of_the_key(tree: Path) -> None:
    build = tree / "workflows" / "build.akm"
    build.write_text(
        "# akmc: ignore-file[W700]\n" + build.read_text().replace("inputs = [params.version, params.target]", "")
    )
    assert json.loads(_check(tree).stdout) == []
    assert [d["code"] for d in json.loads(_check(tree, "--no-ignore").stdout)] == ["W700", "W700"]
    assert json.loads(_check(tree).stdout) == []


def test_two_processes_share_the_cache_safely(tree: Path) -> None:
    command = [sys.executable, "-m", "akmc", "check", "--format", "json"]
    for _ in range(5):
        processes = [subprocess.Popen(command, cwd=tree, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        outputs = [p.communicate(timeout=60)[0] for p in processes]
        assert all(json.loads(o) == [] for o in outputs)
    for entry in (tree / ".akmc-cache" / "v1").iterdir():
        json.loads(entry.read_text())  # only whole entries, never a half-written one


def test_parallel_checking_gives_the_same_answer(tmp_path: Path) -> None:
    many_workflows(tmp_path)
    serial = run_cli("check", "--no-cache", "--jobs", "1", cwd=tmp_path)
    parallel = run_cli("check", "--no-cache", "--jobs", "2", cwd=tmp_path)
    assert serial.returncode == parallel.returncode == 1
    assert serial.stdout == parallel.stdout and "(40 files checked)" in parallel.stdout


# -- an entry speaks only for what it was computed from ------------------------------------------

FLAWED = source("""
    workflow "w" {
      step a {
        shell "echo ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
        inputs = [steps.nope.output]
      }
    }
""")


@pytest.fixture
def flawed(tmp_path: Path) -> Path:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "w.akm").write_text(FLAWED)
    return tmp_path


def _codes(root: Path) -> list[str]:
    result = _check(root)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    return sorted(d["code"] for d in json.loads(result.stdout))


def _entry(root: Path) -> Path:
    return Cache(root, True)._entry_path("w.akm")


def test_a_planted_entry_does_not_speak_for_a_file(flawed: Path) -> None:
    """An entry anyone can compute (the right key, the file's true hash, nothing found) is not believed."""
    digest = tagged_sha256((flawed / "w.akm").read_bytes())
    planted = {
        "key": [FORMAT, fingerprint(), "w.akm", True],
        "deps": {"w.akm": digest},
        "diagnostics": [],
        "children": [],
        "uses": [],
        "sha256": digest,
    }
    _entry(flawed).parent.mkdir(parents=True)
    _entry(flawed).write_text(json.dumps(planted))
    assert _codes(flawed) == ["E203", "E600"]
    assert json.loads(_entry(flawed).read_text())["diagnostics"]  # rewritten with what the file holds
    assert _codes(flawed) == ["E203", "E600"]


def test_an_edited_or_truncated_entry_is_ignored_and_rewritten(flawed: Path) -> None:
    assert _codes(flawed) == ["E203", "E600"]
    genuine = _entry(flawed).read_text()
    edited = json.loads(genuine)
    edited["diagnostics"] = []
    _entry(flawed).write_text(json.dumps(edited))
    assert _codes(flawed) == ["E203", "E600"]
    _entry(flawed).write_text(genuine[: len(genuine) // 2])
    assert _codes(flawed) == ["E203", "E600"]
    assert json.loads(_entry(flawed).read_text())["diagnostics"]


def test_an_entry_of_another_file_with_the_same_name_is_ignored(flawed: Path, tmp_path: Path) -> None:
    """A genuine entry copied from another workspace, where `w.akm` is clean, speaks only for that file."""
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "akm.toml").write_text("")
    (clean / "w.akm").write_text('workflow "w" {\n  step a { shell "true" }\n}\n')
    assert _codes(clean) == []
    _entry(flawed).parent.mkdir(parents=True)
    shutil.copy(_entry(clean), _entry(flawed))
    assert _codes(flawed) == ["E203", "E600"]


@pytest.mark.parametrize("content", [b"\xff\xfe not json", b"[]", b'{"key": 1}', b" " * (40 << 20) + b"{}", b"null"])
def test_an_entry_of_any_content_is_ignored(flawed: Path, content: bytes) -> None:
    _entry(flawed).parent.mkdir(parents=True)
    _entry(flawed).write_bytes(content)
    assert _codes(flawed) == ["E203", "E600"]


def test_an_entry_that_is_a_fifo_or_a_directory_neither_hangs_nor_fails(flawed: Path) -> None:
    _entry(flawed).parent.mkdir(parents=True)
    os.mkfifo(_entry(flawed))
    assert _codes(flawed) == ["E203", "E600"]
    _entry(flawed).unlink()
    _entry(flawed).mkdir()
    assert _codes(flawed) == ["E203", "E600"]


def test_a_cache_directory_that_is_a_file_or_a_symlink_is_not_used(flawed: Path, tmp_path: Path) -> None:
    (flawed / ".akmc-cache").write_text("not a directory\n")
    assert _codes(flawed) == ["E203", "E600"]
    assert _codes(flawed) == ["E203", "E600"]
    (flawed / ".akmc-cache").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (flawed / ".akmc-cache").symlink_to(elsewhere)
    assert _codes(flawed) == ["E203", "E600"]
    assert list(elsewhere.iterdir()) == []  # nothing written where the link points


def test_settings_are_part_of_the_key(flawed: Path) -> None:
    assert _codes(flawed) == ["E203", "E600"]
    (flawed / "w.akm").write_text(FLAWED.replace("ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "hello"))
    assert _codes(flawed) == ["E203"]
    (flawed / "akm.toml").write_text('[check]\nignore = ["E203"]\n')
    assert _codes(flawed) == []
    (flawed / "akm.toml").write_text("")
    assert _codes(flawed) == ["E203"]


def test_a_file_a_shell_command_runs_appearing_is_seen_by_a_warm_check(tmp_path: Path) -> None:
    """W708 depends on whether the file exists: the path is a dependency of the cached result."""
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "w.akm").write_text('workflow "w" {\n  step s { shell "scripts/publish.sh" }\n}\n')
    assert _codes(tmp_path) == []
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "publish.sh").write_text("#!/bin/sh\n")
    assert _codes(tmp_path) == ["W708"]
    (tmp_path / "scripts" / "publish.sh").unlink()
    assert _codes(tmp_path) == []
