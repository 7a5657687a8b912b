"""Shell completion for both commands, exercised through the real shells' protocols."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli

AKMC = Path(sys.executable).parent / "akmc"


def _typer_complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "_AKMC_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    result = subprocess.run([str(AKMC)], env=env, capture_output=True, text=True, timeout=60)
    return result.stdout.split()


def test_akmc_completes_commands_and_options() -> None:
    assert _typer_complete("akmc ch", 1) == ["check"]
    assert "--format" in _typer_complete("akmc diff --f", 2)
    # typer takes the shell from the process tree (shellingham), where a test runner's workers may have
    # no shell to find; its own switch makes it take the shell named on the command line instead.
    named = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    script = subprocess.run(
        [str(AKMC), "--show-completion", "bash"], env=named, capture_output=True, text=True, timeout=60
    )
    assert script.returncode == 0 and "complete -o default -F _akmc_completion akmc" in script.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_akm_run_bash_completion() -> None:
    script = run_cli("completion", "bash", module="akm_run").stdout
    probe = (
        f'{script}\nCOMP_WORDS=(akm-run re); COMP_CWORD=1; _akm_run; echo "${{COMPREPLY[@]}}"\n'
        'COMP_WORDS=(akm-run run --exp); COMP_CWORD=2; _akm_run; echo "${COMPREPLY[@]}"\n'
    )
    lines = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert lines == ["resume retry", "--expect-hash"]


def test_akm_run_zsh_and_fish_scripts() -> None:
    assert run_cli("completion", "zsh", module="akm_run").stdout.startswith("autoload -U +X bashcompinit")
    fish = run_cli("completion", "fish", module="akm_run").stdout
    assert 'complete -c akm-run -n "__fish_seen_subcommand_from run" -l expect-hash' in fish


@pytest.mark.parametrize("command", ["run", "status", "list", "resume", "approve", "abandon", "verify", "completion"])
def test_every_akm_run_command_shows_an_example(command: str) -> None:
    help_text = run_cli(command, "--help", module="akm_run").stdout
    assert f"Example: akm-run {command}" in help_text


@pytest.mark.parametrize("command", ["explain", "compile", "plan", "diff", "verify", "hash", "schema"])
def test_every_akmc_command_shows_an_example(command: str) -> None:
    assert f"Example: akmc {command}" in run_cli(command, "--help").stdout
