"""docs/runtime.md: its unit examples are the bundled example scripts, and the demo flow runs."""

from __future__ import annotations

import re
import shutil

import pytest

from helpers import REPO, Runtime

PAGE = (REPO / "docs" / "runtime.md").read_text()
FILE_BLOCK = re.compile(r"```\w+ file=(\S+)\n(.*?)```", re.S)


@pytest.mark.parametrize("name", [m.group(1) for m in FILE_BLOCK.finditer(PAGE)])
def test_page_shows_the_example_files(name: str) -> None:
    body = next(m.group(2) for m in FILE_BLOCK.finditer(PAGE) if m.group(1) == name)
    assert (REPO / name).read_text() == body


def test_the_python_and_shell_units_run_as_the_demo_runs_them(runtime: Runtime) -> None:
    ignore = shutil.ignore_patterns("plans", ".akm-run")
    shutil.copytree(REPO / "examples", runtime.root, ignore=ignore, dirs_exist_ok=True)
    plan = runtime.compile("workflows/notes.akm")
    code, document = runtime.run_json(plan, "--param", 'team=["ada", "grace", "linus"]')
    assert code == 0, document
    assert document["exported"] == {"summary": {"lines": 3, "text": "hello, ada\nhello, grace\nhello, linus"}}
    [attempt] = runtime.store().attempts(document["runId"], "summarise:solo")
    assert attempt.stderr_tail is not None and attempt.dispatch_id in attempt.stderr_tail
