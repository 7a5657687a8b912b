"""Composition: `uses` refs, what a parent sees of a child, child-workflow targets, bounds (E400–E404, E408).

The stage is context-free: whether an edge is a cycle, how deep a workflow nests and how many bytes it
embeds depend only on the workflow and what it composes, never on which file a check started from, so a
child compiled for one parent is the same plan every other parent embeds and `akmc compile` writes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from akm_run import features
from akm_run.plan import MAX_DEPTH, MAX_EMBEDDED_BYTES, MAX_PLAN_BYTES, REF, canonical_bytes
from akmc import ast, messages
from akmc import types as t
from akmc.diagnostics import Diagnostic, Related, Report, did_you_mean
from akmc.messages import Message
from akmc.records import build, field, record
from akmc.sources import ref_file
from akmc.workspace import SUFFIX, discover, real_path, ref_of


@record
class Child:
    """What a composing workflow sees of one compiled child."""

    ref: str
    file: str
    ok: bool
    params: dict[str, tuple[t.Type, bool]] = field(default_factory=dict)  # name → (type, required)
    outputs: dict[str, t.Type] = field(default_factory=dict)  # declared type, else the source's type
    plan: dict[str, Any] | None = None
    plan_hash: str = ""
    canonical: bytes = b""  # its plan's canonical bytes, which `plan_hash` is taken over
    size: int = 0  # canonical bytes of its plan
    embedded: int = 0  # canonical bytes of every plan it embeds, all levels
    chain: tuple[str, ...] = ()  # its deepest composition chain, itself first
    first_error: Diagnostic | None = None
    reads: dict[str, str | None] = field(default_factory=dict)  # its sourceReadSet
    deps: dict[str, str | None] | None = None  # what its result depends on (see compiler.FileResult.deps)

    @property
    def output_type(self) -> t.Type:
        """The composing step's output: the child's declared outputs, else `{runId, status}`."""
        if not self.ok:
            return t.ANY
        if not self.outputs:
            return t.RUN_RESULT
        return t.ObjT(tuple(t.Field(name, type_, True) for name, type_ in self.outputs.items()))

    @property
    def exports(self) -> list[str]:
        return list(self.outputs) if self.outputs else ["runId", "status"]


build()


def locate(root: Path, ref: str, is_file: Callable[[Path], bool] = Path.is_file) -> tuple[Path | None, Message | None]:
    """The file a `uses` ref names under `root` (resolved), or (None, why it does not resolve: an E400
    message). `is_file` says whether a source exists (an editor buffer not yet saved counts)."""
    if ref.endswith(SUFFIX):
        return None, messages.child_ref_is_file(ref=ref, suffix=SUFFIX)
    parts = ref.split("/")
    if ref.startswith("/") or ".." in parts or "." in parts or not REF.fullmatch(ref):
        return None, messages.not_a_ref(ref=ref)
    candidate = ref_file(root, ref)
    try:
        real_path(candidate).relative_to(root)
    except ValueError:
        return None, messages.child_outside_root(ref=ref)
    except OSError as error:
        return None, messages.child_unresolvable(ref=ref, why=str(error.strerror or error))
    if not is_file(candidate):
        return None, messages.child_not_found(ref=ref, suffix=SUFFIX)
    return candidate, None


def suggest(root: Path, ref: str) -> str | None:
    """A did-you-mean over the workspace's refs; only called on the error path."""
    refs = [r for p in discover([root]) if (r := ref_of(p, root.resolve())) is not None]
    return did_you_mean(ref, refs)


def uses_targets(workflow: ast.Workflow) -> list[ast.Target]:
    """Every `uses` target of a workflow, in source order (unit steps and map bodies)."""
    found = []
    for step in workflow.every_step():
        for item in step.items:
            if isinstance(item, ast.Target) and item.kind == "uses":
                found.append(item)
            elif isinstance(item, ast.MapBlock):
                found += [i for i in item.items if isinstance(i, ast.Target) and i.kind == "uses"]
    return found


def target(uses: ast.Target, child: Child | None) -> dict[str, Any]:
    """The `child-workflow` target of a `uses`; incomplete (and never written) when the child failed."""
    assert uses.path is not None
    out: dict[str, Any] = {"kind": "child-workflow", "ref": uses.path.value}
    bindings = []
    for binding in sorted(uses.bindings or [], key=lambda b: b.name.text):
        if isinstance(binding.value, ast.Reference):
            kind = "item" if binding.value.root == "item" else "reference"
            bindings.append({"name": binding.name.text, "kind": kind, "from": binding.value.text})
        else:
            bindings.append({"name": binding.name.text, "kind": "literal", "value": t.value_of(binding.value)})
    if bindings:
        out["bindings"] = bindings
    if child is not None and child.plan is not None:
        out["planHash"] = child.plan_hash
        out["plan"] = child.plan
    return out


def failed_child(report: Report, span: ast.Span, child: Child) -> None:
    """E408 at the composing `uses`: the child's own errors stand at the child's file."""
    related: tuple[Related, ...] = ()
    if child.first_error is not None:
        first = child.first_error
        related = (Related(first.file, first.span, f"first error: {first.code} {first.message}"),)
    report.add(messages.child_has_errors(child=child.ref, file=child.file), span, related=related)


def bounds(report: Report, ref: str, sites: list[tuple[ast.Span, Child]]) -> tuple[tuple[str, ...], int]:
    """E402 and E403 at the `uses` that crosses the bound; returns (deepest chain, embedded bytes)."""
    chain: tuple[str, ...] = (ref,)
    embedded = 0
    deep_reported = over_reported = False
    for span, child in sites:
        if len(child.chain) + 1 > len(chain):
            chain = (ref, *child.chain)
        if len(child.chain) + 1 > MAX_DEPTH + 1 and not deep_reported:
            deep_reported = True
            path = " -> ".join((ref, *child.chain))
            message = messages.composition_too_deep(
                child=child.ref, levels=len(child.chain), chain=path, limit=MAX_DEPTH
            )
            report.add(message, span)
        embedded += child.size + child.embedded
        if embedded > MAX_EMBEDDED_BYTES and not over_reported:
            over_reported = True
            adds = child.size + child.embedded
            message = messages.embedded_too_large(total=embedded, child=child.ref, adds=adds, limit=MAX_EMBEDDED_BYTES)
            report.add(message, span)
    return chain, embedded


def plan_size(report: Report, plan: dict[str, Any], size: int, span: ast.Span) -> None:
    """E404 when one plan's canonical bytes exceed the plan size limit."""
    if size <= MAX_PLAN_BYTES:
        return
    largest = max(plan["steps"], key=lambda s: len(canonical_bytes(s)), default=None)
    if largest is None:
        report.add(messages.plan_too_large(size=size, limit=MAX_PLAN_BYTES), span)
    else:
        report.add(messages.plan_too_large_at(size=size, limit=MAX_PLAN_BYTES, step=largest["stepId"]), span)


def unbound_budget(report: Report, workflow: ast.Workflow, plan: Mapping[str, Any]) -> None:
    """W706: `limits { max_tokens }` with no agent unit anywhere in the tree (a `parallel` block's
    members, and the children they compose, included), so it can never bind."""
    if "maxTokens" not in plan["limits"]:
        return
    for each in features.plans(plan):
        if any(step.get("target", {}).get("kind") == "agent" for step in features.every_step(each)):
            return
    for section in workflow.sections:
        for setting in section.settings if section.kind == "limits" else []:
            if isinstance(setting, ast.Setting) and setting.name.text == "max_tokens":
                report.add(messages.tokens_without_agents(), setting.name.span)
