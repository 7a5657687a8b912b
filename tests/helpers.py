"""Shared test helpers: repository paths, the real commands as subprocesses, and workspaces that
check, compile, run and sign. Tests import this module; `conftest.py` only wraps these in fixtures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from akm_run.store import Store
    from akmc.compiler import FileResult
    from akmc.diagnostics import Diagnostic

REPO = Path(__file__).resolve().parent.parent
LANGUAGE_EXAMPLE = REPO / "golden" / "language-example"
DATA = REPO / "tests" / "data"

Files = dict[str, str | bytes]


def source(text: str) -> str:
    """A file written as an indented triple-quoted block, so it reads as the file it stands for:
    drops the newline after the opening quotes and the common indentation, and the closing quotes'
    own line leaves the final newline. Use bytes or plain strings for deliberately odd input."""
    return textwrap.dedent(text.removeprefix("\n"))


def many_workflows(root: Path, count: int = 40) -> None:
    """A workspace of `count` small workflows: every fifth refers to steps it lacks (E2xx), and every
    seventh composes the next one, so checks in shares and in parallel have trees to keep whole."""
    (root / "akm.toml").write_text("")
    (root / "workflows").mkdir()
    for i in range(count):
        body = (
            f'  step s {{\n    shell "true"\n    inputs = [steps.t{i % 3}.output]\n  }}\n'
            if i % 5 == 0
            else '  step s {\n    shell "true"\n  }\n'
        )
        uses = f'  step c {{\n    uses "workflows/w{i + 1}"\n  }}\n' if i % 7 == 0 and i < count - 1 else ""
        (root / "workflows" / f"w{i}.akm").write_text(f'workflow "w{i}" {{\n{body}{uses}}}\n')


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


class Checker:
    """Checks sources written into one temp workspace; `codes(src)` → `["E203@7"]`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "akm.toml").write_text("")

    def write(self, files: Files) -> None:
        for rel, content in files.items():
            target = self.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)

    def result(self, source: str | bytes, name: str = "wf.akm", files: Files | None = None) -> FileResult:
        from akmc.compiler import check_file

        self.write({name: source, **(files or {})})
        return check_file(self.root / name, name)

    def diagnostics(self, source: str | bytes, name: str = "wf.akm", files: Files | None = None) -> list[Diagnostic]:
        return self.result(source, name, files).report.diagnostics

    def __call__(self, source: str | bytes, name: str = "wf.akm", files: Files | None = None) -> list[str]:
        return [f"{d.code}@{d.span.line}" for d in self.diagnostics(source, name, files)]


class Runtime:
    """A workspace whose workflows are compiled with akmc and run by a real `akm-run` process,
    with a real state directory. `runtime.akm("status", run_id)` runs any verb."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / ".state"
        (root / "akm.toml").write_text("")

    def write(self, files: dict[str, str]) -> None:
        for rel, content in files.items():
            target = self.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            if rel.startswith("scripts/"):
                target.chmod(0o755)

    def compile(self, name: str, source: str | None = None, files: dict[str, str] | None = None) -> Path:
        """Write (optionally) and compile `name` to plans/<stem>.plan.json; returns the plan path."""
        from akm_run.plan import render_file
        from akmc.compiler import Session

        if source is not None:
            self.write({name: source, **(files or {})})
        session = Session(self.root)
        result = session.check(self.root / name)
        assert result.plan is not None, [
            f"{d.file}: {d.code} {d.message}" for r in session.results for d in r.report.diagnostics
        ]
        plan_file = self.root / "plans" / (Path(name).stem + ".plan.json")
        plan_file.parent.mkdir(exist_ok=True)
        plan_file.write_text(render_file(result.plan))
        return plan_file

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AKM_")}
        return {**env, "AKM_STATE_DIR": str(self.state), **extra}

    def akm(
        self, *args: str | Path, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "akm_run", *map(str, args)],
            cwd=self.root,
            capture_output=True,
            text=True,
            env=env or self.env(),
            timeout=timeout,
        )

    def run_json(self, *args: str | Path, env: dict[str, str] | None = None) -> tuple[int, Any]:
        """`akm-run run … --format json` → (exit code, document)."""
        result = self.akm("run", *args, "--format", "json", env=env)
        try:
            return result.returncode, json.loads(result.stdout)
        except ValueError:
            raise AssertionError(f"exit {result.returncode}: {result.stdout}\n{result.stderr}") from None

    def store(self) -> Store:
        from akm_run.store import Store

        return Store(self.state)


class Keys:
    """Real ed25519 keys made by ssh-keygen in a temp directory, an allowed signers file listing
    the ones asked for, and signatures made the way `akmc sign` makes them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def key(self, name: str) -> Path:
        private = self.directory / name
        if not private.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", private], check=True)
        return private

    def allowed(self, *principals: str, options: str = "", name: str = "allowed_signers") -> Path:
        """An allowed signers file: `<name>@example.com [options] <public key>` for each key named."""
        lines = [f"{p}@example.com {options} {Path(f'{self.key(p)}.pub').read_text().strip()}" for p in principals]
        path = self.directory / name
        path.write_text("".join(line.replace("  ", " ") + "\n" for line in lines))
        return path

    def sign(self, plan: Path, name: str, namespace: str = "akm-plan") -> Path:
        """Sign with ssh-keygen directly (any namespace); returns PLAN.sig."""
        made = subprocess.run(["ssh-keygen", "-Y", "sign", "-f", self.key(name), "-n", namespace],
                              input=plan.read_bytes(), capture_output=True, check=True)  # fmt: skip
        signature = plan.with_name(plan.name + ".sig")
        signature.write_bytes(made.stdout)
        return signature

    def fingerprint(self, name: str) -> str:
        listed = subprocess.run(["ssh-keygen", "-l", "-f", self.key(name)], capture_output=True, text=True, check=True)
        return listed.stdout.split()[1]
