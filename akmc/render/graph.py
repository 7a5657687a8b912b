"""`akmc graph`: a plan as a Mermaid flowchart or a Graphviz DOT digraph.

Steps are nodes in spine order, joined by solid spine edges; dashed edges carry data references
(inputs, a map's subject, a route's subject, child bindings), labelled with what flows; bold edges
are a route's cases, labelled by their match (`_` for the default). A map is one node marked with its
subject; a child workflow is a cluster holding its `uses` step and its own steps, down to `depth`
levels (-1: all). Node ids are `n0`, `n1`, … so no step id or ref can break the syntax; labels are
escaped for each format, after characters a reader could miss are spelled out as in `akmc plan`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from akmc.render.characters import visible

SPINE, DATA, ROUTE = "spine", "data", "route"


@dataclass(slots=True)
class Node:
    id: str
    lines: list[str]
    shape: str  # step | map | route | approval | params | child


@dataclass(slots=True)
class Cluster:
    id: str
    title: str
    nodes: list[Node] = field(default_factory=list)
    clusters: list[Cluster] = field(default_factory=list)


@dataclass(slots=True)
class Graph:
    root: Cluster
    edges: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)  # (from, to, kind) → labels
    count: int = 0
    clusters: int = 0

    def node(self, into: Cluster, lines: list[str], shape: str) -> Node:
        node = Node(f"n{self.count}", lines, shape)
        self.count += 1
        into.nodes.append(node)
        return node

    def edge(self, source: str, target: str, kind: str, label: str = "") -> None:
        labels = self.edges.setdefault((source, target, kind), [])
        if label and label not in labels:
            labels.append(label)


def build(plan: dict[str, Any], depth: int = -1) -> Graph:
    graph = Graph(Cluster("c_root", visible(f"{plan['ref']}: {plan['title']}")))
    _add(graph, graph.root, plan, None, depth)
    return graph


def _add(graph: Graph, into: Cluster, plan: dict[str, Any], entry: Node | None, depth: int) -> None:
    """The steps of `plan` inside `into`; `entry` is the `uses` step whose params a child reads. A
    `parallel` block is a cluster of its members, with no edge between them: the spine forks into
    each member and joins after the block."""
    ids: dict[str, list[str]] = {}  # a block's are its members'
    every = [m for s in plan["steps"] for m in [s, *s.get("members", [])]]
    blocks = {s["stepId"]: [m["stepId"] for m in s["members"]] for s in plan["steps"] if s["kind"] == "parallel"}
    params = entry
    if params is None and any(r.startswith("params.") for s in every for r in _references(s)):
        params = graph.node(into, ["params"], "params")
    previous = [entry.id] if entry is not None else []

    def sources(reference: str) -> list[tuple[str, str]]:
        head, _, rest = reference.partition(".")
        if head == "params":
            return [(params.id, rest)] if params is not None else []
        step, _, path = rest.partition(".")
        label = path.removeprefix("output").lstrip(".")
        if step in blocks:  # `steps.B.output.M…` flows from member M; the whole output from each member
            member = label.split(".", 1)[0].split("[", 1)[0]
            if member in blocks[step]:
                return [(ids[member][0], label)]
            label = label or step
        return [(found, label) for found in ids.get(step, [])]

    def one(holder: Cluster, step: dict[str, Any], before: list[str]) -> str:
        target = step.get("target", {})
        is_child = target.get("kind") == "child-workflow" and depth != 0
        if is_child:
            graph.clusters += 1
            child = Cluster(f"c{graph.clusters}", f"{step['stepId']}: {target['ref']}")
            holder.clusters.append(child)
            holder = child
        node = graph.node(holder, _lines(step), _shape(step))
        ids[step["stepId"]] = [node.id]
        for spine in before:
            graph.edge(spine, node.id, SPINE)
        for reference in _references(step):
            for found, label in sources(reference):
                graph.edge(found, node.id, DATA, label)
        if is_child:
            _add(graph, holder, target["plan"], node, depth - 1)
        return node.id

    for step in plan["steps"]:
        if step["kind"] != "parallel":
            previous = [one(into, step, previous)]
            continue
        graph.clusters += 1
        block = Cluster(f"c{graph.clusters}", step["stepId"])
        into.clusters.append(block)
        previous = [one(block, member, previous) for member in step["members"]]
        ids[step["stepId"]] = previous
    routes = [s for s in plan["steps"] if s["kind"] == "route"]
    for step in routes:  # a case that selects a block goes into each member, as the spine does
        choices = [(visible(json.dumps(c["match"], ensure_ascii=False)), c["next"]) for c in step["cases"]]
        for match, chosen in [*choices, *([("_", step["default"])] if "default" in step else [])]:
            for member in ids[chosen]:
                graph.edge(ids[step["stepId"]][0], member, ROUTE, match)


def _references(step: dict[str, Any]) -> list[str]:
    if step["kind"] == "parallel":
        return []
    """What a step reads: its inputs, a map's subject, a route's subject, a child's bound references."""
    references = [*step.get("inputs", [])]
    references += [step[key] for key in ("over", "input") if key in step]
    bindings = step.get("target", {}).get("bindings", [])
    return references + [b["from"] for b in bindings if b["kind"] == "reference"]


def _shape(step: dict[str, Any]) -> str:
    if step["kind"] in ("route", "map"):
        return str(step["kind"])
    kind = step["target"]["kind"]
    return "approval" if kind == "approval" else "child" if kind == "child-workflow" else "step"


def _lines(step: dict[str, Any]) -> list[str]:
    if step["kind"] == "route":
        return [step["stepId"], "route on", step["input"]]
    target = step["target"]
    kind = target["kind"]
    lines = [step["stepId"], kind]
    if step["kind"] == "map":
        lines[1:] = [f"map {kind} over", step["over"]]
    if kind == "child-workflow":
        lines[1] = f"uses {target['ref']}"
    elif kind == "script":
        lines[1] += f" {target['path']}"
    if "gate" in step:
        lines.append(f"gate, max_loops {step['gate']['maxLoops']}")
    return lines


# -- Mermaid ---------------------------------------------------------------------------------------

_MERMAID_SHAPES = {
    "step": ('("', '")'),
    "map": ('[["', '"]]'),
    "route": ('{"', '"}'),
    "approval": ('{{"', '"}}'),
    "params": ('[/"', '"/]'),
    "child": ('[["', '"]]'),
}
_MERMAID_ARROWS = {SPINE: "-->", DATA: "-.->", ROUTE: "==>"}


def _mermaid_text(text: str) -> str:
    out = []
    for char in text:
        if char in '"#<>&|`' or ord(char) < 32:
            out.append(f"#{ord(char)};")
        else:
            out.append(char)
    return "".join(out)


def mermaid(plan: dict[str, Any], depth: int = -1) -> str:
    graph = build(plan, depth)
    lines = ["flowchart TB"]

    def node(n: Node) -> str:
        left, right = _MERMAID_SHAPES[n.shape]
        return f"{n.id}{left}{'<br/>'.join(_mermaid_text(t) for t in n.lines)}{right}"

    lines += _nested(graph.root, "  ", node, lambda c: [f'subgraph {c.id} ["{_mermaid_text(c.title)}"]'], "end")
    for (source, target, kind), labels in graph.edges.items():
        label = f'|"{_mermaid_text(", ".join(labels))}"|' if labels else ""
        lines.append(f"  {source} {_MERMAID_ARROWS[kind]}{label} {target}")
    lines.append("  classDef route fill:#fff4d6,stroke:#b38600")
    lines.append("  classDef approval fill:#fde2e2,stroke:#b30000")
    lines.append("  classDef params fill:#e8f0fe,stroke:#3367d6")
    for n in _all_nodes(graph.root):
        if n.shape in ("route", "approval", "params"):
            lines.append(f"  class {n.id} {n.shape}")
    return "\n".join(lines) + "\n"


def _nested(
    c: Cluster, indent: str, node: Callable[[Node], str], opening: Callable[[Cluster], list[str]], closing: str
) -> list[str]:
    """A cluster's nodes, then each sub-cluster between its opening and closing lines, indented."""
    lines = [indent + node(n) for n in c.nodes]
    for sub in c.clusters:
        lines += [indent + line for line in opening(sub)]
        lines += _nested(sub, indent + "  ", node, opening, closing)
        lines.append(indent + closing)
    return lines


def _all_nodes(c: Cluster) -> list[Node]:
    return [*c.nodes, *(n for sub in c.clusters for n in _all_nodes(sub))]


# -- DOT ---------------------------------------------------------------------------------------------

_DOT_SHAPES = {
    "step": 'shape=box, style="rounded"',
    "map": "shape=box3d",
    "route": 'shape=diamond, style="filled", fillcolor="#fff4d6"',
    "approval": 'shape=hexagon, style="filled", fillcolor="#fde2e2"',
    "params": 'shape=parallelogram, style="filled", fillcolor="#e8f0fe"',
    "child": 'shape=box, style="rounded,bold"',
}
_DOT_EDGES = {
    SPINE: 'color="#555555"',
    DATA: 'style=dashed, color="#3367d6", fontcolor="#3367d6"',
    ROUTE: 'style=bold, color="#b38600", fontcolor="#b38600"',
}


def _dot_text(*lines: str) -> str:
    """A quoted DOT string, one `\\n`-separated line per argument."""
    return '"' + "\\n".join(_dot_escape(line) for line in lines) + '"'


def _dot_escape(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 32:
            out.append(" ")
        else:
            out.append(char)
    return "".join(out)


def dot(plan: dict[str, Any], depth: int = -1) -> str:
    graph = build(plan, depth)
    lines = [
        "digraph akm {",
        '  graph [rankdir=TB, fontname="Helvetica", labelloc=t, labeljust=l, label='
        + _dot_text(graph.root.title)
        + "];",
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]

    def node(n: Node) -> str:
        return f"{n.id} [label={_dot_text(*n.lines)}, {_DOT_SHAPES[n.shape]}];"

    def opening(c: Cluster) -> list[str]:
        return [
            f"subgraph cluster_{c.id} {{",
            f'  label={_dot_text(c.title)}; style="rounded,dashed"; color="#888888";',
        ]

    lines += _nested(graph.root, "  ", node, opening, "}")
    for (source, target, kind), labels in graph.edges.items():
        label = f"label={_dot_text(', '.join(labels))}, " if labels else ""
        lines.append(f"  {source} -> {target} [{label}{_DOT_EDGES[kind]}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
