"""The configuration, hook and CI examples in docs/ are real: they parse and name real things."""

from __future__ import annotations

import re
from pathlib import Path

import yaml  # installed with pre-commit, a test dependency

from akmc.config import load
from conftest import REPO

CLI = (REPO / "docs" / "cli.md").read_text()
CI = (REPO / "docs" / "ci.md").read_text()


def _block(text: str, fence: str) -> str:
    match = re.search(rf"```{fence}\n(.*?)```", text, re.S)
    assert match is not None, fence
    return match.group(1)


def test_akm_toml_example_loads(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text(_block(CLI, "toml"))
    config = load(tmp_path)
    assert config.ignore == ["W700"] and config.exclude == ["workflows/experimental/**"]
    assert config.checks("workflows/release.akm") and not config.checks("workflows/experimental/x.akm")


def test_pre_commit_example_names_the_hooks_this_repository_offers() -> None:
    offered = {hook["id"] for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    example = yaml.safe_load(_block(CLI, "yaml"))
    assert {hook["id"] for hook in example["repos"][0]["hooks"]} == offered
    readme = (REPO / "README.md").read_text()
    assert {h["id"] for h in yaml.safe_load(_block(readme, "yaml"))["repos"][0]["hooks"]} <= offered


def test_github_actions_workflow_runs_the_gate() -> None:
    workflow = yaml.safe_load(_block(CI, r"yaml file=\.github/workflows/akm\.yml"))
    steps = workflow["jobs"]["check"]["steps"]
    commands = "\n".join(step.get("run", "") for step in steps)
    assert "akmc check --format github" in commands and "akmc check --format sarif" in commands
    assert "akmc compile workflows --out-dir plans --check" in commands and "akmc diff" in commands
    assert any(step.get("uses", "").startswith("github/codeql-action/upload-sarif") for step in steps)
    assert workflow["permissions"]["security-events"] == "write"


def test_akm_run_examples_parse_with_the_real_command_line() -> None:
    import shlex

    from akm_run.cli import build_parser

    block = CLI.split("## `akm-run`", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [shlex.split(line, comments=True) for line in block.splitlines() if line.startswith("akm-run")]
    assert {words[1] for words in lines} >= {"run", "status", "logs", "approve"}
    for words in lines:
        build_parser().parse_args(words[1:])  # a misspelt verb or flag exits 2 here
