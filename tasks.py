#!/usr/bin/env python3
"""Set up a local virtual environment and run the project's jobs.

    python3 tasks.py demo   # set up, then check, compile, verify, summarise and run the bundled examples
    python3 tasks.py test   # set up, then lint, type-check and run the whole test suite
    python3 tasks.py docs   # set up, then build the documentation site into site/

Only Python 3.11+ with pip and venv is needed; everything else is installed
into .venv from the project's own pyproject files, except the system tools the
tests run (Graphviz, OpenSSH's ssh-keygen, a PostgreSQL server), which `test`
installs with apt-get when missing, and the VS Code grammar's test tool, which
`test` installs with npm where Node is.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".installed"


def shown(argv: tuple[str | Path, ...]) -> str:
    """The command line as a shell reads it back, with paths inside the repository relative to it:
    pasted at the repository root, it runs the same command."""
    words = [str(a.relative_to(ROOT)) if isinstance(a, Path) and a.is_relative_to(ROOT) else str(a) for a in argv]
    return "+ " + shlex.join(words)


def run(*argv: str | Path, check: bool = True, env: dict[str, str] | None = None) -> int:
    print(shown(argv), file=sys.stderr, flush=True)
    return subprocess.run([str(a) for a in argv], cwd=ROOT, check=check, env=env).returncode


def setup() -> None:
    """Create .venv and install both packages (editable) with the test tools, once per change."""
    wanted = hashlib.sha256(
        b"".join(p.read_bytes() for p in (ROOT / "pyproject.toml", ROOT / "runtime" / "pyproject.toml"))
    ).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not (BIN / "python").exists():
        venv.create(VENV, with_pip=True)
    pip = (BIN / "python", "-m", "pip", "install", "--quiet")
    run(*pip, "-e", ".[test,lsp,docs]")
    # akmc depends on the bundled runtime by direct reference (a plain copy); make it editable too
    # so runtime changes need no reinstall, with its `postgres` extra, which the shared-store tests use.
    run(*pip, "-e", "./runtime[postgres]")
    STAMP.write_text(wanted)


# The demo, run from the repository root: what a new user sees first. tests/e2e/test_demo.py runs
# exactly these commands (twice, from a copy of examples/), so the demo cannot break unnoticed.
DEMO_STATE = ("--state-dir", "examples/.akm-run")
DEMO: tuple[tuple[str, ...], ...] = (
    ("akmc", "check", "examples/"),
    ("akmc", "compile", "examples/workflows", "--out-dir", "examples/plans", "--root", "examples"),
    ("akmc", "verify", "examples/plans/workflows/notes.plan.json"),
    ("akmc", "plan", "examples/workflows/notes.akm"),
    # Independent checks at once, and a fan-out that goes on past a missing file.
    ("akm-run", "run", "examples/plans/workflows/checks.plan.json", "--workdir", "examples", *DEMO_STATE),
    # Run the reviewed plan: notes composes hello, which runs inline as a child run. The units run
    # in examples/ while the state directory is given relative to the repository root.
    (
        "akm-run",
        "run",
        "examples/plans/workflows/notes.plan.json",
        "--param",
        'team=["ada", "grace", "linus"]',
        "--workdir",
        "examples",
        *DEMO_STATE,
    ),
    ("akm-run", "list", *DEMO_STATE),
)


# Tools the project runs that pip cannot install, by the Debian package that brings each: Graphviz
# `dot` renders `akmc graph --format dot` in a test; ssh-keygen (OpenSSH 8.2+) makes and checks plan
# signatures; initdb and pg_ctl start the private PostgreSQL server of the shared-store tests. The
# tests fail rather than skip without them.
SYSTEM_TOOLS = {"dot": "graphviz", "ssh-keygen": "openssh-client", "initdb": "postgresql", "pg_ctl": "postgresql"}
# Debian keeps PostgreSQL's server programs off PATH, one directory per major version.
POSTGRES_BIN = "/usr/lib/postgresql/*/bin"


def found(tool: str) -> bool:
    return shutil.which(tool) is not None or any(os.access(Path(d, tool), os.X_OK) for d in glob.glob(POSTGRES_BIN))


def system_tools() -> None:
    """Install the missing system tools with apt-get where this machine may be changed (root, as in
    CI); otherwise name what is missing and how to install it."""
    missing = sorted({package for tool, package in SYSTEM_TOOLS.items() if not found(tool)})
    if not missing:
        return
    if os.name == "posix" and os.geteuid() == 0 and shutil.which("apt-get"):
        quiet = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (
            ("apt-get", "update", "-q"),
            ("apt-get", "install", "-y", "-q", "--no-install-recommends", *missing),
        ):
            print(shown(argv), file=sys.stderr, flush=True)
            subprocess.run(argv, cwd=ROOT, env=quiet, check=True)
        return
    print(
        f"note: missing system packages {', '.join(missing)} (Debian: apt-get install {' '.join(missing)});"
        " the tests that use them fail without them",
        file=sys.stderr,
    )


# The VS Code extension's grammar has scope tests run by `vscode-tmgrammar-test` (npm). Where Node is
# installed (as in CI), `test` installs it from editors/vscode/package-lock.json into the gitignored
# editors/vscode/node_modules, once per change of the lock file; the test fails rather than skips
# when Node is present and the tool is not.
VSCODE = ROOT / "editors" / "vscode"


def node_tools() -> None:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        print("note: Node.js is not installed; the VS Code grammar's scope tests are skipped", file=sys.stderr)
        return
    lock = VSCODE / "package-lock.json"
    stamp = VSCODE / "node_modules" / ".installed"
    wanted = hashlib.sha256(lock.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    run(npm, "ci", "--prefix", VSCODE, "--no-audit", "--no-fund", "--loglevel=error")
    stamp.write_text(wanted)


def demo() -> int:
    setup()
    for program, *argv in DEMO:
        run(BIN / program, *argv)
    return 0


# pytest runs the suite on two worker processes per core (pytest-xdist): most tests wait on
# subprocesses and sleeps, so more workers than cores pays (docs/performance.md has the figures).
# Under CI (`$CI` set) hypothesis runs its thorough profile, a contributor's run the fast one
# (tests/profiles.py). Arguments given to `test` come after these, so `test -n0` runs serially,
# `test --hypothesis-profile=fast` overrides CI's profile; `-p no:xdist` drops the workers.
def workers() -> int:
    return 2 * (os.cpu_count() or 1)


def pytest_args(extra: list[str], ci: bool = False) -> list[str]:
    serial = any(arg.replace(" ", "").endswith("no:xdist") for arg in extra)
    parallel = () if serial else ("-n", str(workers()), "--dist", "loadgroup")
    profile = ("--hypothesis-profile=thorough",) if ci else ()
    # The slowest tests, named at the end of every run: where the suite's time goes is measured
    # in each run, not guessed (docs/performance.md, "The test suite").
    return [*parallel, *profile, "--durations=30", *extra]


def test() -> int:
    setup()
    system_tools()
    node_tools()
    run(BIN / "ruff", "check", ".")
    run(BIN / "ruff", "format", "--check", ".")
    run(BIN / "mypy")
    # The suite starts thousands of short `akmc` and `akm-run` processes. Where PYTHONDONTWRITEBYTECODE
    # is set (some shells and CI images set it), each compiled the checkout's modules again, and
    # pytest rewrote every test module again in each worker: 36 s of a fresh clone's run on 2 cores
    # (docs/performance.md). The test job writes bytecode as Python does by default, into the
    # gitignored __pycache__ directories.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # Compiled once here, not by the first of the many processes that import each module at once in
    # a fresh clone (a no-op when the bytecode is up to date).
    run(BIN / "python", "-m", "compileall", "-q", "-j", "0", "akmc", "runtime/akm_run", "tests", env=env)
    argv = pytest_args(sys.argv[2:], ci=bool(os.environ.get("CI")))
    return run(BIN / "python", "-m", "pytest", *argv, check=False, env=env)


def docs() -> int:
    """Build the documentation site into site/ (strictly: a broken link or anchor fails it)."""
    setup()
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # the theme's notice about its successor
    code = run(BIN / "mkdocs", "build", "--strict", check=False)
    if code == 0:
        print(f"the site is in site/: open {(ROOT / 'site' / 'index.html').as_uri()}", file=sys.stderr)
    return code


def main() -> int:
    jobs = {"demo": demo, "test": test, "docs": docs}
    if len(sys.argv) < 2 or sys.argv[1] not in jobs:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return jobs[sys.argv[1]]()
    except subprocess.CalledProcessError as error:
        return error.returncode or 1


if __name__ == "__main__":
    sys.exit(main())
