"""`akmc graph`: Mermaid pinned by snapshots; DOT rendered by Graphviz's real `dot`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from akmc.compiler import Session
from akmc.render import graph
from helpers import LANGUAGE_EXAMPLE, REPO, run_cli

CORPUS = REPO / "golden" / "corpus"
NESTED = REPO / "golden" / "compose" / "nested"


def _plans() -> dict[str, dict[str, Any]]:
    plans = {}
    for root in (CORPUS, LANGUAGE_EXAMPLE, *sorted(p for p in (REPO / "golden" / "compose").iterdir())):
        session = Session(root)
        for path in sorted((root / "workflows").glob("*.akm")):
            plan = session.check(path).plan
            if plan is not None:
                plans[f"{root.name}/{path.name}"] = plan
    return plans


def _dot() -> str:
    found = shutil.which("dot")
    if found is None:  # never skipped: `python3 tasks.py test` installs Graphviz where it can
        pytest.fail(
            "Graphviz `dot` is not installed (Debian: apt-get install graphviz); `python3 tasks.py test` "
            "installs it when run as root"
        )
    return found


def _render(source: str, fmt: str = "svg") -> str:
    done = subprocess.run([_dot(), f"-T{fmt}"], input=source, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Warning" not in done.stderr and "Error" not in done.stderr, done.stderr
    return done.stdout


def test_mermaid_on_the_golden_corpus(snapshot: SnapshotAssertion) -> None:
    shown = {}
    for root, name in ((CORPUS, "everything"), (LANGUAGE_EXAMPLE, "release"), (NESTED, "release")):
        result = run_cli("graph", f"workflows/{name}.akm", cwd=root)
        assert result.returncode == 0, result.stderr
        shown[f"{root.name}/{name}"] = result.stdout
    shown["nested/release --depth 1"] = run_cli("graph", "workflows/release.akm", "--depth", "1", cwd=NESTED).stdout
    assert shown == snapshot


def test_dot_renders_every_golden_plan_with_graphviz() -> None:
    plans = _plans()
    assert len(plans) > 20
    for name, plan in plans.items():
        svg = _render(graph.dot(plan))
        titles = re.findall(r"<title>(n\d+)</title>", svg)
        assert len(titles) == len(set(titles)), name
        for step in plan["steps"]:
            assert f">{step['stepId']}</text>" in svg, (name, step["stepId"])


def test_dot_draws_route_cases_maps_and_children_as_clusters() -> None:
    plain = run_cli("graph", "workflows/release.akm", "--format", "dot", cwd=LANGUAGE_EXAMPLE)
    assert plain.returncode == 0
    source = plain.stdout
    rendered = json.loads(_render(source, "json"))
    clusters = [o for o in rendered["objects"] if o["name"].startswith("cluster_")]
    assert [c["label"] for c in clusters] == ["checklist: workflows/release-checklist"]
    labels = {e.get("label") for e in rendered["edges"]}
    assert {'"pass"', '"fail"', "files", "verdict"} <= labels
    review = next(o for o in rendered["objects"] if o.get("label", "").startswith("review"))
    assert review["shape"] == "box3d" and "steps.collect.output.files" in review["label"]


def test_depth_limits_the_nested_clusters() -> None:
    def clusters(*depth: str) -> int:
        source = run_cli("graph", "workflows/release.akm", "--format", "dot", *depth, cwd=NESTED).stdout
        return len([o for o in json.loads(_render(source, "json"))["objects"] if o["name"].startswith("cluster_")])

    assert (clusters(), clusters("--depth", "1"), clusters("--depth", "0")) == (2, 1, 0)
    refused = run_cli("graph", "workflows/release.akm", "--depth", "-1", cwd=NESTED)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr


def test_hostile_names_cannot_break_either_syntax(workspace: Path) -> None:
    title = 'A "quoted" \\ title <b>#1</b> | `x` {y} ] ) --> z'
    (workspace / "w.akm").write_text(
        "workflow " + json.dumps(title) + " {\n  params {\n    mode: string\n  }\n"
        "  step pick {\n    route params.mode {\n" + '      "a\\"]] --> b" -> one\n      _ -> one\n    }\n  }\n'
        '  step one {\n    shell "echo"\n  }\n}\n'
    )
    source = run_cli("graph", "w.akm", "--format", "dot", cwd=workspace).stdout
    rendered = json.loads(_render(source, "json"))
    svg = _render(source)
    assert ">w: A &quot;quoted&quot; \\ title &lt;b&gt;#1&lt;/b&gt; | `x` {y} ] ) &#45;&#45;&gt; z</text>" in svg
    # both cases lead to `one`: one edge carries both labels
    assert any("]] --> b" in e.get("label", "") and e["label"].endswith(", _") for e in rendered["edges"])
    mermaid = run_cli("graph", "w.akm", cwd=workspace).stdout
    for line in mermaid.splitlines()[1:]:
        # every quoted label holds no raw quote, HTML (but the line breaks), pipe or backtick
        inside = re.findall(r'"([^"]*)"', line.replace("<br/>", " "))
        assert all(not set(text) & set("<>|`") for text in inside), line


def test_graph_of_a_refused_plan_or_a_broken_source(workspace: Path) -> None:
    (workspace / "bad.plan.json").write_text("{}")
    assert run_cli("graph", "bad.plan.json", cwd=workspace).returncode == 4
    (workspace / "w.akm").write_text("workflow {")
    broken = run_cli("graph", "w.akm", "--format", "dot", cwd=workspace)
    assert broken.returncode == 1 and "E10" in broken.stderr and broken.stdout == ""
    assert run_cli("graph", "w.akm", "--format", "png", cwd=workspace).returncode == 2


def test_the_picture_in_the_docs_is_current() -> None:
    """docs/images/release-graph.svg is `dot -Tsvg` of the committed DOT, which must be today's output:
    refresh both with the command below when the drawing changes."""
    # akmc graph workflows/release.akm --format dot > docs/images/release-graph.dot  (in golden/language-example)
    # dot -Tsvg docs/images/release-graph.dot -o docs/images/release-graph.svg
    images = REPO / "docs" / "images"
    current = run_cli("graph", "workflows/release.akm", "--format", "dot", cwd=LANGUAGE_EXAMPLE).stdout
    assert (images / "release-graph.dot").read_text() == current
    svg = (images / "release-graph.svg").read_text()
    assert "<svg" in svg and ">checklist: workflows/release&#45;checklist</text>" in svg
    assert "images/release-graph.svg" in (REPO / "docs" / "cli.md").read_text()


def test_a_parallel_block_is_a_cluster_with_no_edge_between_its_members() -> None:
    plan = _plans()["corpus/parallel.akm"]
    built = graph.build(plan)
    [block] = [c for c in built.root.clusters if c.title == "checks"]
    members = {n.id for n in block.nodes}
    assert len(members) == 3
    assert not [edge for edge in built.edges if edge[0] in members and edge[1] in members]
    into = {edge[1] for edge in built.edges if edge[2] == graph.SPINE and edge[1] in members}
    assert into == members  # the spine forks into every member, and joins after the block
    rendered = json.loads(_render(graph.dot(plan), "json"))
    assert "checks" in [o["label"] for o in rendered["objects"] if o["name"].startswith("cluster_")]


def test_data_from_a_member_and_a_route_into_a_block_are_drawn_as_they_run(tmp_path: Path) -> None:
    """`steps.p.output.b.y` flows from member `b` alone (its whole output from every member); a route
    case selecting the block goes into each member, as the spine does (it selects no single member)."""
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "w.akm").write_text(
        'workflow "W" {\n  params { m: "x" | "y" = "x" }\n  step r { route params.m { "x" -> p  "y" -> z } }\n'
        '  parallel p {\n    step a { shell "echo 1" output: { x: int } }\n'
        '    step b { shell "echo 2" output: { y: int } }\n  }\n  step z { shell "echo 3" }\n'
        '  step after { shell "cat" inputs = [steps.p.output.b.y, steps.p.output] }\n}\n'
    )
    plan = Session(tmp_path).check(tmp_path / "w.akm").plan
    assert plan is not None
    built = graph.build(plan)
    name = {n.id: n.lines[0] for n in graph._all_nodes(built.root)}
    edges = {(name[s], name[t], kind): labels for (s, t, kind), labels in built.edges.items()}
    assert edges[("b", "after", graph.DATA)] == ["b.y", "p"] and edges[("a", "after", graph.DATA)] == ["p"]
    assert edges[("r", "a", graph.ROUTE)] == edges[("r", "b", graph.ROUTE)] == ['"x"']
    assert edges[("r", "z", graph.ROUTE)] == ['"y"']
    _render(graph.dot(plan))  # Graphviz draws it
