"""The semantic diff of two plans (`akmc diff`): what a reviewer needs to know changed.

Every top-level plan key that affects a run is compared: params, outputs and limits by name,
steps by id (a step that moved among the steps both plans share reports its new position), the
read set by path, any other section (`notify`) as one object field by field, and a child workflow
whose plan hash changed carries the diff of its own plan, recursively. Which keys there are comes
from the plan definition (`akm_run.planformat.Plan`), so a key it gains is compared as an object
section until it is given a better comparison; only the keys in NOT_COMPARED are left out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from akm_run import planformat as pf
from akm_run.plan import plan_hash

ADDED, REMOVED, CHANGED = "+", "-", "~"
WORKFLOW_FIELDS = ("ref", "title", "description", "irVersion")  # each one value, compared whole
NAMED_SECTIONS = ("params", "outputs", "limits")  # compared entry by entry
# The top-level keys a diff leaves out, each with why no change of it can go unseen.
NOT_COMPARED = {
    "features": "derived from the constructs the plan uses (the decoder refuses a mismatch), "
    "so it changes only with a step, a limit or a section that the diff reports",
}
# The other sections (`notify`), each one object compared field by field, in the definition's order.
OBJECT_SECTIONS = tuple(
    key
    for key in pf.Plan.__annotations__
    if key not in {*WORKFLOW_FIELDS, *NAMED_SECTIONS, "steps", "sourceReadSet", *NOT_COMPARED}
)


@dataclass(slots=True)
class FieldChange:
    field: str
    old: Any = None
    new: Any = None


@dataclass(slots=True)
class Change:
    """One added, removed or changed param, output, limit, step, read-set file or workflow field."""

    section: str  # workflow | params | outputs | limits | notify (an object section) | steps | readSet
    op: str
    name: str
    old: Any = None
    new: Any = None
    fields: list[FieldChange] = field(default_factory=list)
    child: PlanDiff | None = None  # a changed child workflow's own diff


@dataclass(slots=True)
class PlanDiff:
    old_ref: str
    new_ref: str
    old_hash: str
    new_hash: str
    changes: list[Change] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return self.old_hash == self.new_hash

    def to_json(self) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "old": {"ref": self.old_ref, "planHash": self.old_hash},
            "new": {"ref": self.new_ref, "planHash": self.new_hash},
            "changes": [_change_json(c) for c in self.changes],
        }


@dataclass(slots=True)
class WorkflowDiff:
    """One workflow of a workspace compared across revisions (`akmc diff --rev`)."""

    path: str  # the source, relative to the workspace root
    status: str  # added | removed | changed | equal
    digest: str = ""  # the plan hash of the new side (of the old one for a removed workflow)
    diff: PlanDiff | None = None
    plan: dict[str, Any] | None = None  # an added workflow's plan, shown in full

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "status": self.status, "planHash": self.digest}
        if self.diff is not None and self.status == "changed":
            out["diff"] = self.diff.to_json()
        if self.plan is not None:
            out["plan"] = self.plan
        return out


def _change_json(change: Change) -> dict[str, Any]:
    out: dict[str, Any] = {"section": change.section, "op": change.op, "name": change.name}
    if change.op != ADDED:
        out["old"] = change.old
    if change.op != REMOVED:
        out["new"] = change.new
    if change.fields:
        out["fields"] = [{"field": f.field, "old": f.old, "new": f.new} for f in change.fields]
    if change.child is not None:
        out["child"] = change.child.to_json()
    return out


def diff(old: dict[str, Any], new: dict[str, Any]) -> PlanDiff:
    """Every difference between two verified plans, in a stable order."""
    result = PlanDiff(old["ref"], new["ref"], plan_hash(old), plan_hash(new))
    if result.equal:
        return result
    for name in WORKFLOW_FIELDS:
        if old.get(name) != new.get(name):
            result.changes.append(Change("workflow", CHANGED, name, old.get(name), new.get(name)))
    for section in NAMED_SECTIONS:
        result.changes += _named(section, old.get(section, {}), new.get(section, {}))
    for section in OBJECT_SECTIONS:
        result.changes += _object(section, old.get(section), new.get(section))
    result.changes += _steps(_flat(old["steps"]), _flat(new["steps"]))
    old_reads = {e["path"]: e.get("sha256") for e in old["sourceReadSet"]}
    new_reads = {e["path"]: e.get("sha256") for e in new["sourceReadSet"]}
    result.changes += _named("readSet", old_reads, new_reads)
    return result


def _named(section: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    changes = []
    for name in new:
        if name not in old:
            changes.append(Change(section, ADDED, name, new=new[name]))
        elif old[name] != new[name]:
            fields = _fields(old[name], new[name]) if isinstance(new[name], dict) else []
            changes.append(Change(section, CHANGED, name, old[name], new[name], fields))
    changes += [Change(section, REMOVED, name, old=old[name]) for name in old if name not in new]
    return changes


def _object(section: str, old: Any, new: Any) -> list[Change]:
    """A section that is one object (`notify`): added, removed, or changed field by field."""
    if old == new:
        return []
    if old is None:
        return [Change(section, ADDED, section, new=new)]
    if new is None:
        return [Change(section, REMOVED, section, old=old)]
    fields = _fields(old, new) if isinstance(old, dict) and isinstance(new, dict) else []
    return [Change(section, CHANGED, section, old, new, fields or [FieldChange(section, old, new)])]


def _flat(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps with each `parallel` block's members after it, as steps of their own that name
    their block (`block`) at its index; the block lists its members by id. A step moved into or out
    of a block is then a change of the step (its `block`) and of the block (its `members`)."""
    flat = []
    for step in steps:
        if step["kind"] != "parallel":
            flat.append(step)
            continue
        flat.append({**step, "members": [m["stepId"] for m in step["members"]]})
        flat += [{**m, "index": step["index"], "block": step["stepId"]} for m in step["members"]]
    return flat


def _steps(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[Change]:
    old_by_id = {s["stepId"]: s for s in old}
    new_ids = {s["stepId"] for s in new}
    shared_old = [s["stepId"] for s in old if s["stepId"] in new_ids]
    shared_new = [s["stepId"] for s in new if s["stepId"] in old_by_id]
    changes = []
    for step in new:
        before = old_by_id.get(step["stepId"])
        if before is None:
            changes.append(Change("steps", ADDED, step["stepId"], new=step))
            continue
        fields = _fields(_comparable(before), _comparable(step))
        if shared_old.index(step["stepId"]) != shared_new.index(step["stepId"]):
            fields.insert(0, FieldChange("position", before["index"] + 1, step["index"] + 1))
        child = None
        old_target, new_target = before.get("target", {}), step.get("target", {})
        if (
            old_target.get("kind") == new_target.get("kind") == "child-workflow"
            and old_target["planHash"] != new_target["planHash"]
        ):
            child = diff(old_target["plan"], new_target["plan"])
        if fields or child is not None:
            changes.append(Change("steps", CHANGED, step["stepId"], before, step, fields, child))
    changes += [Change("steps", REMOVED, s["stepId"], old=s) for s in old if s["stepId"] not in new_ids]
    return changes


def _comparable(step: dict[str, Any]) -> dict[str, Any]:
    """A step without what is reported another way: its index (moves are found by order) and an
    embedded child plan (diffed recursively). A script's text stays: its content diff is the change."""
    out = {k: v for k, v in step.items() if k != "index"}
    target = out.get("target")
    if isinstance(target, dict):
        out["target"] = {k: v for k, v in target.items() if k != "plan"}
    return out


_LEAVES = ("schema", "outputSchema")  # a changed schema reads best as the whole type


def _flatten(value: Any, prefix: str, into: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict) and value and not prefix.endswith(_LEAVES):
        for key, sub in value.items():
            _flatten(sub, f"{prefix}.{key}" if prefix else key, into)
    else:
        into[prefix] = value
    return into


def _fields(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
    """The dotted paths whose values differ, in the new value's order, then the removed ones."""
    before, after = _flatten(old, "", {}), _flatten(new, "", {})
    changed = [FieldChange(k, before.get(k), v) for k, v in after.items() if before.get(k) != v or k not in before]
    changed += [FieldChange(k, v, None) for k, v in before.items() if k not in after]
    return changed


# -- what a summary line counts ---------------------------------------------------------------

_TEXT_KINDS = {"command": "command", "instructions": "prompt", "message": "approval text"}
_SECTION_NOUN = {"params": "param", "outputs": "output", "limits": "limit", "notify": "notifier"}
ORDER = (
    "workflow added",
    "workflow removed",
    "step added",
    "step removed",
    "step moved",
    "command changed",
    "script changed",
    "prompt changed",
    "approval text changed",
    "child workflow changed",
    "step setting changed",
    "param added",
    "param removed",
    "param changed",
    "output added",
    "output removed",
    "output changed",
    "limit changed",
    *(f"{_SECTION_NOUN.get(s, s)} {op}" for s in OBJECT_SECTIONS for op in ("added", "removed", "changed")),
    "workflow field changed",
)
_OPS = {ADDED: "added", REMOVED: "removed", CHANGED: "changed"}


def kinds(result: PlanDiff, counted: frozenset[str] = frozenset()) -> list[str]:
    """One entry (from ORDER) per kind of change, at every level: what a summary line counts.
    A child whose ref is in `counted` is compared on its own, so its changes are not counted again."""
    found = []
    for change in result.changes:
        if change.section == "readSet":
            continue  # the steps whose files changed say so
        if change.section == "workflow":
            found.append("workflow field changed")
        elif change.section != "steps":
            found.append(f"{_SECTION_NOUN.get(change.section, change.section)} {_OPS[change.op]}")
        elif change.op != CHANGED:
            found.append(f"step {_OPS[change.op]}")
        else:
            found += _step_kinds(change)
        if change.child is not None and change.child.new_ref not in counted:
            found += kinds(change.child, counted)
    return found


def _step_kinds(change: Change) -> list[str]:
    found = set()
    for f in change.fields:
        last = f.field.rsplit(".", 1)[-1]
        if f.field == "position":
            found.add("step moved")
        elif last in _TEXT_KINDS:
            found.add(f"{_TEXT_KINDS[last]} changed")
        elif f.field.endswith(("target.text", "target.sha256", "check.text", "check.sha256")):
            found.add("script changed")
        elif f.field.endswith("planHash"):
            found.add("child workflow changed")
        else:
            found.add("step setting changed")
    return sorted(found, key=ORDER.index)
