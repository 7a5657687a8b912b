"""`akmc diff` as text: one line per change, `+` added, `-` removed, `~` changed with its fields."""

from __future__ import annotations

import json
from typing import Any

from akmc.diff import CHANGED, REMOVED, Change, PlanDiff
from akmc.render.summary import duration, schema_text, short_hash, step_line

_SECTIONS = (("params", "params:"), ("outputs", "outputs:"), ("limits", "limits:"), ("steps", "steps:"))


def render(result: PlanDiff) -> str:
    if result.equal:
        return f"no changes: {result.new_ref} {short_hash(result.new_hash)}\n"
    header = f"{result.old_ref} {short_hash(result.old_hash)} -> "
    header += f"{result.new_ref} " if result.new_ref != result.old_ref else ""
    lines = [header + short_hash(result.new_hash)]
    lines += _body(result, "")
    count = _count(result)
    lines.append(f"{count} change{'s' if count != 1 else ''}")
    return "\n".join(lines) + "\n"


def _count(result: PlanDiff) -> int:
    return sum(1 + (_count(c.child) if c.child is not None else 0) for c in result.changes)


def _body(result: PlanDiff, indent: str) -> list[str]:
    lines = [
        f"{indent}  ~ {c.name}: {_value(c.old)} -> {_value(c.new)}" for c in result.changes if c.section == "workflow"
    ]
    for section, title in (*_SECTIONS, ("readSet", "read set:")):
        changes = [c for c in result.changes if c.section == section]
        if not changes:
            continue
        lines.append(indent + title)
        for change in changes:
            lines.append(f"{indent}  {change.op} {_describe(change)}")
            if change.child is not None:
                lines += _body(change.child, indent + "      ")
    return lines


def _describe(change: Change) -> str:
    value = change.old if change.op == REMOVED else change.new
    if change.section == "steps":
        if change.op != CHANGED:
            return step_line(value)
        return f"{change.new['index'] + 1}. {change.name}: {_fields(change)}"
    if change.section == "readSet":
        return change.name
    if change.section == "limits":
        if change.op != CHANGED:
            return f"{change.name} = {_value(value, change.name)}"
        return f"{change.name}: {_value(change.old, change.name)} -> {_value(change.new, change.name)}"
    if change.section == "params":
        if change.op != CHANGED:
            return f"{change.name}: {_param(value)}"
        return f"{change.name}: {_param(change.old)} -> {_param(change.new)}"
    if change.op != CHANGED:
        return f"{change.name} <- {value['from']}" + (f": {schema_text(value['schema'])}" if "schema" in value else "")
    return f"{change.name}: {_fields(change)}"


def _fields(change: Change) -> str:
    return "; ".join(f"{f.field} {_value(f.old, f.field)} -> {_value(f.new, f.field)}" for f in change.fields)


def _param(param: dict[str, Any]) -> str:
    text = schema_text(param["schema"])
    return text + (f" = {json.dumps(param['default'])}" if "default" in param else " (required)")


def _value(value: Any, field: str = "", width: int = 48) -> str:
    """A field's value on one line: durations as written, hashes shortened, long text elided."""
    if value is None:
        return "(none)"
    if isinstance(value, int) and not isinstance(value, bool) and field.endswith(("timeoutMs", "backoffMs")):
        return duration(value)
    if isinstance(value, str) and value.startswith("sha256:"):
        return short_hash(value)
    if field.endswith(("schema", "Schema")) and isinstance(value, dict):
        return schema_text(value)
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= width else text[: width - 1] + "…"
