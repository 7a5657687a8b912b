"""Shared helpers: check sources in temp workspaces and run the real commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LANGUAGE_EXAMPLE = REPO / "golden" / "language-example"


def run_cli(
    *args: str | Path, cwd: Path | None = None, module: str = "akmc", stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m <module> ARGS` as a real subprocess."""
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=120,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace root (it holds akm.toml)."""
    (tmp_path / "akm.toml").write_text("")
    return tmp_path


class Checker:
    """Checks sources written into one temp workspace; `codes(src)` → `["E203@7"]`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "akm.toml").write_text("")

    def write(self, files: dict[str, str | bytes]) -> None:
        for rel, content in files.items():
            target = self.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)

    def result(self, source: str | bytes, name: str = "wf.akm", files: dict[str, str | bytes] | None = None):  # type: ignore[no-untyped-def]
        from akmc.compiler import check_file

        self.write({name: source, **(files or {})})
        return check_file(self.root / name, name)

    def diagnostics(self, source: str | bytes, **kwargs):  # type: ignore[no-untyped-def]
        return self.result(source, **kwargs).report.diagnostics

    def __call__(self, source: str | bytes, **kwargs) -> list[str]:  # type: ignore[no-untyped-def]
        return [f"{d.code}@{d.span.line}" for d in self.diagnostics(source, **kwargs)]


@pytest.fixture
def codes(tmp_path: Path) -> Checker:
    return Checker(tmp_path)
