"""The configuration, hook and CI examples in docs/ are real: they parse and name real things."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # installed with pre-commit, a test dependency; PyYAML has no type hints

from akm_run import exitcodes
from akm_run.cli import build_parser
from akm_run.signing import REASONS
from akmc.config import load
from helpers import LANGUAGE_EXAMPLE, REPO, source

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
    assert "akmc compile workflows --out-dir plans --check" in commands
    assert "akmc fmt --diff workflows" in commands
    assert any(step.get("uses", "").startswith("github/codeql-action/upload-sarif") for step in steps)
    assert workflow["permissions"]["security-events"] == "write"


def test_akm_run_examples_parse_with_the_real_command_line() -> None:
    block = CLI.split("## `akm-run`", 1)[1].split("```sh illustrative\n", 1)[1].split("```", 1)[0]
    lines = [shlex.split(line, comments=True) for line in block.splitlines() if line.startswith("akm-run")]
    assert {words[1] for words in lines} >= {"run", "status", "logs", "approve"}
    for words in lines:
        build_parser().parse_args(words[1:])  # a misspelt verb or flag exits 2 here


def test_the_review_job_posts_the_markdown_diff_of_a_pull_request(tmp_path: Path) -> None:
    """The job's script runs for real: a clone with `origin/main`, a branch that edits a command, and
    a stand-in `gh` on PATH that records the comment it was asked to post."""
    job = yaml.safe_load(_block(CI, r"yaml file=\.github/workflows/akm\.yml"))["jobs"]["review"]
    assert job["permissions"]["pull-requests"] == "write"
    assert job["steps"][0]["with"]["fetch-depth"] == 0
    [post] = [step for step in job["steps"] if "gh pr comment" in step.get("run", "")]

    def git(cwd: Path, *args: str) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    origin, clone, bin_dir = tmp_path / "origin.git", tmp_path / "clone", tmp_path / "bin"
    shutil.copytree(LANGUAGE_EXAMPLE, tmp_path / "seed")
    git(tmp_path / "seed", "init", "-q", "-b", "main")
    git(tmp_path / "seed", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "add", "-A")
    git(tmp_path / "seed", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-qm", "base")
    git(tmp_path, "clone", "-q", "--bare", "seed", str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    release = clone / "workflows" / "release.akm"
    release.write_text(release.read_text().replace('shell "scripts/publish.sh', 'shell "scripts/publish.sh --force'))
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(
        source(r"""
            #!/bin/sh
            printf "%s\n" "$@" > "$GH_ARGS"
            cp "$5" "$GH_BODY"
        """)
    )
    (bin_dir / "gh").chmod(0o755)

    def post_comment() -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "GITHUB_BASE_REF": "main",
            "PR_NUMBER": "7",
            "GH_TOKEN": "unused",
            "GH_ARGS": str(tmp_path / "args"),
            "GH_BODY": str(tmp_path / "body.md"),
            "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        return subprocess.run(
            ["bash", "-eo", "pipefail", "-c", post["run"]],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = post_comment()
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "args").read_text().split() == [
        "pr",
        "comment",
        "7",
        "--body-file",
        "akm-review.md",
        "--edit-last",
        "--create-if-none",
    ]
    body = (tmp_path / "body.md").read_text()
    assert body.startswith("1 workflow changed against origin/main: 1 command changed\n")
    assert "+" in body and "scripts/publish.sh --force" in body and "<details>" in body
    release.write_text(release.read_text().replace("step publish {", "step publish {{"))
    broken = post_comment()
    assert broken.returncode == 2 and "E10" in broken.stderr  # errors fail the job


def test_the_signing_workflow_signs_checked_plans_on_the_protected_branch_only() -> None:
    workflow = yaml.safe_load(_block(CI, r"yaml file=\.github/workflows/akm-sign\.yml"))
    assert workflow[True] == {"push": {"branches": ["main"]}}  # YAML reads the key `on` as true
    commands = [step.get("run", "") for step in workflow["jobs"]["sign"]["steps"]]
    check = next(i for i, c in enumerate(commands) if "akmc compile workflows --out-dir plans --check" in c)
    sign = next(i for i, c in enumerate(commands) if "akmc sign plans/**/*.plan.json --key" in c)
    verify = next(i for i, c in enumerate(commands) if "akmc verify" in c and "--allowed-signers" in c)
    assert check < sign < verify
    assert all("shopt -s globstar" in commands[i] for i in (sign, verify))  # `**` is nested plans too


def test_the_signing_gate_fails_on_a_plan_no_source_accounts_for(tmp_path: Path) -> None:
    """The step before signing, run for real: an orphan plan stops the job before anything is signed."""
    steps = yaml.safe_load(_block(CI, r"yaml file=\.github/workflows/akm-sign\.yml"))["jobs"]["sign"]["steps"]
    [gate] = [step["run"] for step in steps if "--check" in step.get("run", "")]
    shutil.copytree(REPO / "golden" / "corpus", tmp_path / "ws")
    nested = tmp_path / "ws" / "plans" / "workflows" / "team"
    nested.mkdir()
    shutil.copy(tmp_path / "ws" / "plans" / "workflows" / "minimal.plan.json", nested / "old.plan.json")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", gate],
        cwd=tmp_path / "ws",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == "orphan:  plans/workflows/team/old.plan.json\n"
    (nested / "old.plan.json").unlink()
    assert subprocess.run(["bash", "-c", gate], cwd=tmp_path / "ws", env=env, capture_output=True).returncode == 0


def test_the_refusal_table_names_every_reason() -> None:
    page = (REPO / "docs" / "signing.md").read_text()
    table = re.findall(r"^\| `([a-z ]+)` \|", page.split("message begins")[1].split("\n\n")[0], re.M)
    assert table == [reason.replace("_", " ") for reason in REASONS]


def _table(text: str, header: str) -> list[list[str]]:
    """The rows of the table whose header row is `header`, as cells (`\\|` kept inside a cell)."""
    lines = text.split(header + "\n", 1)[1].splitlines()[1:]
    rows = [line for line in lines[: next((i for i, x in enumerate(lines) if not x.startswith("|")), len(lines))]]
    return [[cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def test_the_runtime_command_table_names_every_command_and_option_of_the_real_parser() -> None:
    rows = _table((REPO / "docs" / "runtime.md").read_text(), "| command | what it does |")
    documented: dict[str, str] = {}
    for command, _ in rows:
        verb = command.strip("`").split()[1]
        documented[verb] = documented.get(verb, "") + " " + command
    parser = build_parser()
    verbs = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(documented) == sorted(verbs)
    common = {"-h", "--help", "--state-dir", "--database", "--format"}  # said once, under the table
    for verb, sub in verbs.items():
        options = {o for action in sub._actions for o in action.option_strings if o.startswith("--")}
        assert sorted(o for o in options - common if o not in documented[verb]) == [], verb


def test_the_runtime_exit_code_table_names_each_code_once() -> None:
    rows = _table((REPO / "docs" / "runtime.md").read_text(), "| code | meaning |")
    codes = [int(row[0]) for row in rows]
    constants = {v for k, v in vars(exitcodes).items() if k.isupper() and isinstance(v, int)}
    assert sorted(codes) == sorted(set(codes)) == sorted(constants)


def test_the_pre_commit_snippets_pin_nothing_that_does_not_exist() -> None:
    """No release is tagged yet, so a snippet must not pin a tag: it says to pin a commit."""
    tags = subprocess.run(["git", "tag", "--list"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for text in ((REPO / "README.md").read_text(), CLI):
        rev = yaml.safe_load(_block(text, "yaml"))["repos"][0]["rev"]
        assert rev in tags or rev == "COMMIT", rev
