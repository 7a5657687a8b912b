"""Operating akm-run end to end (runtime-v2.md): any directory, remembered settings, untrusted unit
output, approvals and rejections, logs, prompt timeouts, unwritable state. Real `akm-run` processes
and a real state database; each test states a workflow and what an operator must see."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import Runtime


def _wf(body: str, title: str = "t", head: str = "") -> str:
    return f'workflow "{title}" {{\n{head}{body}}}\n'


def _akm(*args: str | Path, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "akm_run", *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env,
        timeout=timeout,
    )  # fmt: skip


# -- 1. the unit contract holds from any directory ------------------------------------------------------


SCRIPTED = _wf(
    '  step show {\n    script "scripts/show.sh"\n  }\n'
    '  step wait {\n    approval "go on?"\n  }\n'
    '  step after {\n    script "scripts/show.sh"\n  }\n'
)
SHOW = '#!/bin/sh\nprintf \'{"cwd": "%s", "context": "%s", "script": "%s"}\' "$(pwd)" "$AKM_CONTEXT" "$0"\n'


def test_relative_state_dir_with_another_workdir_gives_units_absolute_paths(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SCRIPTED, files={"scripts/show.sh": SHOW})
    (runtime.root / "units").mkdir()
    env = runtime.env()
    del env["AKM_STATE_DIR"]
    result = _akm("run", plan, "--workdir", "units", "--state-dir", "rel-state", cwd=runtime.root, env=env)
    assert result.returncode == 3, result.stderr
    run_id = result.stdout.split()[1]
    from akm_run.store import Store

    shown = Store(runtime.root / "rel-state").step(run_id, "show").output
    assert shown["cwd"] == str((runtime.root / "units").resolve())
    assert os.path.isabs(shown["context"]) and os.path.isabs(shown["script"])
    assert Path(shown["context"]).parent.parent == (runtime.root / "rel-state" / "scratch").absolute()
