"""W708: a shell command that runs a workspace file the plan does not freeze."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akmc.unfrozen import split
from helpers import Checker, source

SCRIPTS = {"scripts/publish.sh": "#!/bin/sh\necho publishing\n", "tools/lint.py": "#!/usr/bin/env python3\n"}


def _wf(command: str, where: str = "target") -> str:
    body = f'shell "{command}"' if where == "target" else f'shell "true"\n    gate {{ check shell "{command}" }}'
    return source(f"""
        workflow "w" {{
          step s {{
            {body}
          }}
        }}
    """)


@pytest.mark.parametrize(
    "command",
    [
        "scripts/publish.sh",
        "./scripts/publish.sh --dry-run",
        "CI=1 scripts/publish.sh",
        "sh scripts/publish.sh",
        "bash -e scripts/publish.sh",
        "python3 tools/lint.py --fix",
        "exec ./scripts/publish.sh",
    ],
)
def test_a_shell_command_running_a_workspace_file_warns(codes: Checker, command: str) -> None:
    assert codes(_wf(command), files=SCRIPTS) == ["W708@3"]


def test_a_gate_check_is_looked_at_too(codes: Checker) -> None:
    assert codes(_wf("scripts/publish.sh", "gate"), files=SCRIPTS) == ["W708@4"]


def test_the_notifier_is_looked_at_too(codes: Checker) -> None:
    """The `notify` section's shell command runs on the host like a step's: a workspace file it runs
    is as unfrozen (editing it changes no plan hash and no `akmc diff`)."""
    src = source("""
        workflow "w" {
          notify { on = [failed]  shell "COMMAND" }
          step s { shell "true" }
        }
    """)
    assert codes(src.replace("COMMAND", "scripts/publish.sh"), files=SCRIPTS) == ["W708@2"]
    assert codes(src.replace("COMMAND", "curl -d @- https://example.invalid"), files=SCRIPTS) == []


@pytest.mark.parametrize(
    "command",
    [
        "scripts/missing.sh",  # not in the workspace: nothing the compile could freeze
        "echo scripts/publish.sh",  # named, not run
        "make publish",
        "python3 -c 'print(1)'",
        "/usr/bin/env true",
        "../elsewhere/publish.sh",
        "scripts",  # a directory
        "sh -c 'unbalanced",
    ],
)
def test_other_commands_do_not(codes: Checker, command: str) -> None:
    assert codes(_wf(command), files={**SCRIPTS, "scripts/x": ""}) == []


def test_the_frozen_form_and_the_suppression_are_quiet(codes: Checker) -> None:
    frozen = source("""
        workflow "w" {
          step s {
            script "scripts/publish.sh"
          }
        }
    """)
    assert codes(frozen, files=SCRIPTS) == []
    assert codes(_wf("scripts/publish.sh").replace('.sh"', '.sh"  # akmc: ignore[W708]'), files=SCRIPTS) == []


def test_the_message_points_to_script(codes: Checker) -> None:
    [found] = codes.diagnostics(_wf("sh scripts/publish.sh"), files=SCRIPTS)
    assert "`scripts/publish.sh`" in found.message and 'script "scripts/publish.sh"' in (found.help or "")


@given(st.text(alphabet=st.sampled_from(list(" \t\r\n\x0b\x0c\xa0\u2003ab=/.-_'\"\\#$;|")), max_size=24))
def test_words_are_split_as_shlex_splits_them(command: str) -> None:
    """The fast path for plain command lines gives shlex's words exactly."""
    try:
        expected: list[str] | None = shlex.split(command, comments=True)
    except ValueError:
        expected = None
    assert split(command) == expected
