"""The commands the docs mark as run (```sh run) run as printed: each page's marked blocks, in
order, in an empty directory holding the files the page shows (```LANG file=PATH), with akmc and
akm-run on PATH; and the documentation site builds with `mkdocs build --strict`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

FILE_BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```", re.S | re.M)
RUN_BLOCK = re.compile(r"^```sh run\n(.*?)^```", re.S | re.M)
PAGES = sorted(p for p in (REPO / "docs").rglob("*.md") if RUN_BLOCK.search(p.read_text(encoding="utf-8")))


def test_pages_mark_blocks_to_run() -> None:
    assert REPO / "docs" / "getting-started.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO / "docs")))
def test_the_marked_commands_run_as_printed(page: Path, tmp_path: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for name, content in FILE_BLOCK.findall(text):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content, encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for block in RUN_BLOCK.findall(text):
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, f"{block}\n{result.stdout}\n{result.stderr}"


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
