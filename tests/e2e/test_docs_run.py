"""The commands the docs mark as run (```sh run) run as printed: each page's marked blocks, in
order, in an empty directory holding the files the page shows (```LANG file=PATH), with akmc and
akm-run on PATH, as an unprivileged user (as a reader runs them: PostgreSQL refuses root); every
other shell block is marked illustrative; and the documentation site builds with
`mkdocs build --strict`."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO

FILE_BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```", re.S | re.M)
RUN_BLOCK = re.compile(r"^```sh run\n(.*?)^```", re.S | re.M)
PAGES = sorted(p for p in (REPO / "docs").rglob("*.md") if RUN_BLOCK.search(p.read_text(encoding="utf-8")))


SHELL_FENCE = re.compile(r"^\s*```(?:sh|bash|shell|console|zsh)\b(.*)$", re.M)


def test_pages_mark_blocks_to_run() -> None:
    assert {REPO / "docs" / "getting-started.md", REPO / "docs" / "scale-out.md"} <= set(PAGES)


def test_every_shell_block_is_run_or_marked_illustrative() -> None:
    """A command the docs show either runs here or says it is only shown (the README's run in
    `.ci/run`, tests/e2e/test_demo.py); a shell file the docs show (```sh file=…) is neither."""
    unmarked = [
        f"{page.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}"
        for page in sorted((REPO / "docs").rglob("*.md"))
        for text in [page.read_text(encoding="utf-8")]
        for match in SHELL_FENCE.finditer(text)
        if match[1].strip() not in {"run", "illustrative"} and not match[1].strip().startswith("file=")
    ]
    assert unmarked == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO / "docs")))
def test_the_marked_commands_run_as_printed(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    # Not under pytest's tmp_path, whose parents are private to the user running the tests.
    directory = Path(tempfile.mkdtemp(prefix="akm-docs-"))
    try:
        for name, content in FILE_BLOCK.findall(text):
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_text(content, encoding="utf-8")
        user = unprivileged(directory)
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        env = {**os.environ, "PATH": path, "HOME": str(directory), "XDG_CACHE_HOME": str(directory / ".cache")}
        for block in RUN_BLOCK.findall(text):
            code, out, err = run_block(block, directory, env, user)
            assert code == 0, f"{block}\n{out}\n{err}"
    finally:
        stop_servers(directory)
        shutil.rmtree(directory, ignore_errors=True)


def run_block(block: str, directory: Path, env: dict[str, str], user: dict[str, Any]) -> tuple[int, str, str]:
    """Run one block with bash (-euo pipefail) in a session of its own; whatever it leaves running
    in that session (a background worker, once it failed midway) is killed after it."""
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **user,
    )
    try:
        out, err = process.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return process.returncode, out, err


def unprivileged(directory: Path) -> dict[str, Any]:
    """subprocess.run's arguments that run a block as `nobody` when the tests run as root (and give
    it `directory`), else none."""
    if os.geteuid() != 0:
        return {}
    nobody = pwd.getpwnam("nobody")
    for path in [directory, *directory.rglob("*")]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


def stop_servers(directory: Path) -> None:
    """Stop the PostgreSQL servers a block that failed midway left running (a server leaves the
    block's session)."""
    for pidfile in directory.rglob("postmaster.pid"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGQUIT)  # PostgreSQL's immediate stop


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """Broken links and anchors, pages left out of the navigation and diagnostic codes without a
    page fail the build (mkdocs.yml: strict, validation; docs_hooks.py)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "diagnostics" / "E203.html").exists()
    assert (tmp_path / "site" / "changelog.html").exists()
