"""Review of a `map` over `uses` with `item` bindings (golden/compose/map-item): every renderer of
`akmc plan`, `akmc graph` and `akmc diff` (two files, `--rev`, and the documented git textconv
driver in a real repository) shows the bindings as the source writes them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from helpers import REPO, committed, edit, git, run_cli

MAP_ITEM = REPO / "golden" / "compose" / "map-item"
ROLLOUT = "workflows/rollout.akm"
BINDINGS = ("with environment <- item.name", "with region <- item.region", "with version <- params.version")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the golden case committed in a git repository (the workspace is its root)."""
    root = tmp_path / "repo"
    shutil.copytree(MAP_ITEM, root)
    return committed(root)


@pytest.mark.parametrize(
    "args",
    [[], ["--summary"], ["--format", "markdown"], ["--summary", "--format", "markdown"]],
    ids=["text", "summary", "markdown", "summary-markdown"],
)
def test_plan_shows_item_bindings_in_source_terms(args: list[str], snapshot: SnapshotAssertion) -> None:
    result = run_cli("plan", ROLLOUT, *args, cwd=MAP_ITEM)
    assert result.returncode == 0, result.stderr
    assert "internal error" not in result.stderr
    if "--summary" in args:
        assert "with: environment <- item.name, region <- item.region, version <- params.version" in result.stdout
    else:
        assert all(line in result.stdout for line in BINDINGS), result.stdout
    assert result.stdout == snapshot


def test_plan_json_and_graphs_read_the_item_bindings() -> None:
    plan = json.loads(run_cli("plan", ROLLOUT, "--format", "json", cwd=MAP_ITEM).stdout)["plan"]
    bindings = plan["steps"][0]["target"]["bindings"]
    assert {"name": "environment", "kind": "item", "from": "item.name"} in bindings
    mermaid = run_cli("graph", ROLLOUT, cwd=MAP_ITEM)
    assert mermaid.returncode == 0, mermaid.stderr
    # an item binding reads the map's subject, which the `over` edge from the params already draws
    assert '-.->|"environments, version"|' in mermaid.stdout
    dot = run_cli("graph", ROLLOUT, "--format", "dot", cwd=MAP_ITEM)
    assert dot.returncode == 0 and dot.stdout.startswith("digraph"), dot.stderr


def test_diff_of_two_files_shows_a_changed_item_binding_as_source(workspace: Path, tmp_path: Path) -> None:
    before = tmp_path / "before.akm"
    shutil.copy(workspace / ROLLOUT, before)
    edit(workspace / ROLLOUT, "environment = item.name", "environment = item.region")
    edit(workspace / ROLLOUT, "version = params.version", 'version = "1.2.3"')
    edit(workspace / ROLLOUT, "region = item.region\n", "")
    shutil.copy(before, workspace / "workflows" / "before.akm")
    text = run_cli("diff", "workflows/before.akm", ROLLOUT, cwd=workspace)
    assert text.returncode == 1, text.stderr
    assert (
        "~ 1. deploy: with environment: item.name -> item.region; with region: item.region -> (none); "
        'with version: params.version -> "1.2.3"'
    ) in text.stdout
    assert '[{"' not in text.stdout and "target.bindings" not in text.stdout
    assert (
        "1 step setting changed"
        in run_cli("diff", "workflows/before.akm", ROLLOUT, "--format", "markdown", cwd=workspace).stdout
    )
    document = json.loads(run_cli("diff", "workflows/before.akm", ROLLOUT, "--format", "json", cwd=workspace).stdout)
    [field] = next(c for c in document["changes"] if c["section"] == "steps")["fields"]
    assert field["field"] == "target.bindings"  # the JSON keeps the plan's own values
    assert {"name": "environment", "kind": "item", "from": "item.region"} in field["new"]


def test_rev_shows_map_steps_added_and_removed_and_a_workflow_that_did_not_exist(workspace: Path) -> None:
    edit(workspace / ROLLOUT, "environment = item.name", "environment = item.region")
    (workspace / "workflows" / "again.akm").write_text((workspace / ROLLOUT).read_text())
    text = run_cli("diff", "--rev", "HEAD", cwd=workspace)
    assert text.returncode == 1, text.stderr
    assert "~ 1. deploy: with environment: item.name -> item.region" in text.stdout
    assert "+ workflows/again.akm (new workflow)" in text.stdout
    assert "with environment <- item.region" in text.stdout  # the added workflow, in full
    for output_format in ("markdown", "json"):
        result = run_cli("diff", "--rev", "HEAD", "--format", output_format, cwd=workspace)
        assert result.returncode == 1 and "internal error" not in result.stderr, result.stderr
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "again")
    mapped = (workspace / ROLLOUT).read_text()
    edit(workspace / ROLLOUT, mapped[mapped.index("  step deploy {") : mapped.index("  step announce {")], "")
    edit(workspace / ROLLOUT, "inputs = [steps.deploy.output]", "inputs = [params.version]")
    (workspace / "workflows" / "again.akm").unlink()
    removed = run_cli("diff", "--rev", "HEAD", cwd=workspace)
    assert removed.returncode == 1, removed.stderr
    assert "- 1. deploy  [map child-workflow]" in removed.stdout and "- workflows/again.akm (workflow removed" in (
        removed.stdout
    )
    only_new = run_cli("diff", "--rev", "HEAD~1", "workflows/again.akm", cwd=workspace)
    assert only_new.returncode == 2 and "no workflow under workflows/again.akm" in only_new.stderr


def test_git_textconv_driver_on_a_map_with_item_bindings(workspace: Path) -> None:
    """The set-up docs/cli.md documents, run as written in a real repository: `*.plan.json
    diff=akmplan` with `akmc plan` as textconv."""
    setup = (REPO / "docs" / "cli.md").read_text().split("**As a git diff driver**", 1)[1]
    setup = setup.split("```sh illustrative\n", 1)[1].split("```", 1)[0]
    assert "textconv" in setup
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path}
    subprocess.run(["sh", "-e", "-c", setup], cwd=workspace, env=env, check=True)
    assert run_cli("compile", ROLLOUT, "-o", "rollout.plan.json", cwd=workspace).returncode == 0
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "plan")
    edit(workspace / ROLLOUT, "environment = item.name", "environment = item.region")
    assert run_cli("compile", ROLLOUT, "-o", "rollout.plan.json", cwd=workspace).returncode == 0
    shown = subprocess.run(
        ["git", "diff", "rollout.plan.json"], cwd=workspace, env=env, capture_output=True, text=True, check=False
    )
    assert shown.returncode == 0 and "internal error" not in shown.stderr, shown.stderr
    assert "-       with environment <- item.name" in shown.stdout
    assert "+       with environment <- item.region" in shown.stdout
    assert '"kind": "item"' not in shown.stdout
    git(workspace, "commit", "-qam", "region")
    logged = subprocess.run(["git", "log", "-p", "-1"], cwd=workspace, env=env, capture_output=True, text=True)
    assert logged.returncode == 0 and "+       with environment <- item.region" in logged.stdout, logged.stderr


def test_deep_and_wide_maps_render(tmp_path: Path) -> None:
    """Maps inside maps five levels down, each binding forty params from its item and the rest."""
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "workflows").mkdir()
    params = "\n".join(f'    p{i}: string = "x"' for i in range(40))
    for level in range(6):
        bindings = " ".join(f"p{i} = item" if i % 2 else f"p{i} = params.p{i}" for i in range(40))
        bindings += ' items = params.items tag = "t\u034f"'
        odd = ", ".join(f"params.p{i}" for i in range(1, 40, 2))
        used = ", ".join(f"params.p{i}" for i in range(40))
        body = (
            f'  step down {{\n    map params.items {{\n      uses "workflows/level{level + 1}" {{ {bindings} }}\n    }}\n  }}\n'
            if level < 5
            else f'  step leaf {{\n    shell "echo leaf"\n    inputs = [{used}, params.tag, params.items]\n  }}\n'
        )
        body += f'  step use {{\n    shell "true"\n    inputs = [{odd}, params.tag]\n  }}\n' if level < 5 else ""
        head = (
            f'workflow "Level {level}" {{\n  params {{\n    items: list[string]\n    tag: string = ""\n{params}\n  }}\n'
        )
        (tmp_path / "workflows" / f"level{level}.akm").write_text(head + body + "}\n")
    for args in ([], ["--summary"], ["--format", "markdown"], ["--format", "json"]):
        result = run_cli("plan", "workflows/level0.akm", *args, cwd=tmp_path)
        assert result.returncode == 0 and result.stderr == "", result.stderr
    shown = run_cli("plan", "workflows/level0.akm", cwd=tmp_path).stdout
    assert "with p39 <- item" in shown and "1.1.1.1.1.1. leaf  [shell]" in shown
    assert 'with tag <- "t⟨U+034F⟩"' in shown
