"""Fresh virtual environments: the two install commands the docs promise both work."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow


def _fresh(tmp: Path, *install: str) -> Path:
    venv.create(tmp / "venv", with_pip=True)
    bin_dir = tmp / "venv" / "bin"
    subprocess.run([bin_dir / "python", "-m", "pip", "install", "--quiet", *install], cwd=REPO, check=True, timeout=600)
    return bin_dir


def _works(bin_dir: Path, tmp: Path) -> None:
    (tmp / "w.akm").write_text('workflow "w" {\n  step a {\n    shell "x"\n')
    check = subprocess.run([bin_dir / "akmc", "check", "w.akm"], cwd=tmp, capture_output=True, text=True)
    assert check.returncode == 1 and "error[E100]" in check.stdout
    explain = subprocess.run([bin_dir / "akmc", "explain", "E100"], cwd=tmp, capture_output=True, text=True)
    assert explain.returncode == 0 and explain.stdout.startswith("# E100")
    run = subprocess.run([bin_dir / "akm-run", "--version"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith("akm-run ")
    # the installed copy is used, not the checkout
    where = subprocess.run(
        [bin_dir / "python", "-c", "import akmc, akm_run; print(akmc.__file__, akm_run.__file__)"],
        cwd=tmp,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(REPO) not in where.stdout


def test_pip_install_runtime_and_compiler(tmp_path: Path) -> None:
    _works(_fresh(tmp_path, "./runtime", "."), tmp_path)


def test_plain_pip_install_brings_the_runtime(tmp_path: Path) -> None:
    _works(_fresh(tmp_path, "."), tmp_path)


def test_runtime_imports_nothing_of_the_compiler() -> None:
    code = (
        "import pkgutil, importlib, sys, akm_run\n"
        "for m in pkgutil.walk_packages(akm_run.__path__, 'akm_run.'): importlib.import_module(m.name)\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'akmc', 'lark', 'pydantic', 'typer'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
