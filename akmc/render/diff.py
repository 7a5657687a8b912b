"""`akmc diff` as text and Markdown: one line per change, `+` added, `-` removed, `~` changed.

Nothing is cut. A changed text (command, prompt, approval text, script content, description) is a
full line diff below its step, so an edit at the end of a long line shows as two different lines;
an added step or workflow shows every setting it brings, as `akmc plan` does."""

from __future__ import annotations

import difflib
import json
from collections import Counter
from typing import Any

from akmc.diff import (
    ADDED,
    CHANGED,
    NAMED_SECTIONS,
    OBJECT_SECTIONS,
    ORDER,
    REMOVED,
    Change,
    FieldChange,
    PlanDiff,
    WorkflowDiff,
    kinds,
)
from akmc.render import plan as full
from akmc.render.characters import visible
from akmc.render.summary import binding_text, duration, schema_text, short_hash

_SECTIONS = tuple((section, f"{section}:") for section in (*NAMED_SECTIONS, *OBJECT_SECTIONS, "steps"))
_TEXTS = ("command", "message", "instructions", "text", "description", "title")


def render(result: PlanDiff) -> str:
    if result.equal:
        return f"no changes: {result.new_ref} {result.new_hash}\n"
    count = _count(result)
    lines = [*_lines(result), f"{count} change{'s' if count != 1 else ''}"]
    return "\n".join(lines) + "\n"


def _lines(result: PlanDiff) -> list[str]:
    header = f"{result.old_ref} {result.old_hash} -> "
    header += f"{result.new_ref} " if result.new_ref != result.old_ref else ""
    return [header + result.new_hash, *_body(result, "")]


def render_workspace(results: list[WorkflowDiff], revision: str) -> str:
    lines = [summary(results, revision)]
    for item in results:
        if item.status != "equal":
            lines += ["", *_workflow_lines(item)]
    return "\n".join(lines) + "\n"


def _workflow_lines(item: WorkflowDiff) -> list[str]:
    if item.status == "added":
        assert item.plan is not None
        return [f"+ {item.path} (new workflow)", *full.render(item.plan, item.digest).rstrip("\n").split("\n")]
    if item.status == "removed":
        return [f"- {item.path} (workflow removed; it was {item.digest})"]
    assert item.diff is not None
    return [f"~ {item.path}", *_lines(item.diff)]


def summary(results: list[WorkflowDiff], revision: str = "") -> str:
    """`3 workflows changed: 2 steps added, 1 command changed, …` (or that nothing changed)."""
    changed = [r for r in results if r.status != "equal"]
    counts: Counter[str] = Counter()
    compared = frozenset(r.path.removesuffix(".akm") for r in results if r.status == "changed")
    for item in changed:
        if item.status in ("added", "removed"):
            counts[f"workflow {item.status}"] += 1
        elif item.diff is not None:
            counts.update(kinds(item.diff, compared))
    against = f" against {revision}" if revision else ""
    if not changed:
        return f"no workflow changed{against} ({len(results)} compared)"
    head = f"{len(changed)} workflow{'s' * (len(changed) != 1)} changed{against}"
    return head + ": " + ", ".join(_counted(kind, counts[kind]) for kind in ORDER if counts[kind])


def _counted(kind: str, n: int) -> str:
    noun, _, verb = kind.rpartition(" ")
    return f"{n} {noun}{'s' * (n != 1)} {verb}"


def _count(result: PlanDiff) -> int:
    return sum(1 + (_count(c.child) if c.child is not None else 0) for c in result.changes)


def _body(result: PlanDiff, indent: str) -> list[str]:
    lines = []
    for change in (c for c in result.changes if c.section == "workflow"):
        lines += _field_lines(FieldChange(change.name, change.old, change.new), indent + "  ~ ", indent + "      ")
    for section, title in (*_SECTIONS, ("readSet", "read set:")):
        changes = [c for c in result.changes if c.section == section]
        if not changes:
            continue
        lines.append(indent + title)
        for change in changes:
            lines += _describe(change, indent + "  ")
            if change.child is not None:
                lines += _body(change.child, indent + "      ")
    return lines


def _describe(change: Change, indent: str) -> list[str]:
    value = change.old if change.op == REMOVED else change.new
    head = f"{indent}{change.op} "
    if change.section == "steps":
        if change.op == ADDED:
            return [head + full.step_header(value), *full.step_lines(value, indent + "  ")[1:]]
        if change.op == REMOVED:
            return [head + full.step_header(value)]
        inline = [f for f in change.fields if not _is_text(f)]
        texts = [f for f in change.fields if _is_text(f)]
        lines = [f"{head}{change.new['index'] + 1}. {change.name}" + (f": {_inline(inline)}" if inline else "")]
        for f in texts:
            lines += _field_lines(f, indent + "    ", indent + "      ")
        return lines
    if change.section == "readSet":
        return [head + visible(change.name) + (f"  {value}" if change.op != CHANGED and value else "")]
    if change.section == "params":
        if change.op != CHANGED:
            return [head + full.param_line(change.name, value)]
        after = full.param_line(change.name, change.new).removeprefix(f"{change.name}: ")
        return [f"{head}{full.param_line(change.name, change.old)} -> {after}"]
    if change.section == "limits":
        if change.op != CHANGED:
            return [f"{head}{change.name} = {_value(value, change.name)}"]
        return [f"{head}{change.name}: {_value(change.old, change.name)} -> {_value(change.new, change.name)}"]
    if change.section in OBJECT_SECTIONS:
        return _object_lines(change, head, indent)
    if change.op != CHANGED:
        return [head + full.output_line(change.name, value)]
    return [f"{head}{change.name}: {_inline(change.fields)}"]


def _object_lines(change: Change, head: str, indent: str) -> list[str]:
    """A section that is one object (`notify`): an added one in full, as `akmc plan` shows it; a
    changed one field by field, a changed command as a full line diff."""
    if change.op == REMOVED:
        return [head + _object_head(change.name, change.old)]
    if change.op == ADDED:
        if change.name == "notify":
            shown = full.notify_lines(change.new, "")
            return [head + shown[0], *(indent + "  " + line for line in shown[1:])]
        return [head + _object_head(change.name, change.new)]
    inline = [f for f in change.fields if not _is_text(f)]
    lines = [f"{head}{change.name}" + (f": {_inline(inline)}" if inline else "")]
    for f in (f for f in change.fields if _is_text(f)):
        lines += _field_lines(f, indent + "    ", indent + "      ")
    return lines


def _object_head(name: str, value: Any) -> str:
    if name == "notify":
        return full.notify_lines(value, "")[0]
    return f"{name} = {_value(value)}"


def _is_text(f: FieldChange) -> bool:
    if f.field.endswith(("sha256", "planHash")):
        return False
    strings = [v for v in (f.old, f.new) if v is not None]
    return (
        bool(strings)
        and all(isinstance(v, str) for v in strings)
        and (f.field.rsplit(".", 1)[-1] in _TEXTS or any("\n" in v or len(v) > full.INLINE_WIDTH // 2 for v in strings))
    )


def _inline(fields: list[FieldChange]) -> str:
    return "; ".join(_change_text(f) for f in fields)


def _change_text(f: FieldChange) -> str:
    """`field old -> new`; a child's bindings one by one, as the source writes them."""
    if f.field.endswith("bindings"):
        return _bindings_text(f.old or [], f.new or [])
    return f"{f.field} {_value(f.old, f.field)} -> {_value(f.new, f.field)}"


def _bindings_text(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> str:
    """`with environment: item.name -> item.region; with notes: (none) -> "x"`, by name."""
    before = {b["name"]: binding_text(b) for b in old}
    after = {b["name"]: binding_text(b) for b in new}
    changed = [name for name in sorted(before.keys() | after.keys()) if before.get(name) != after.get(name)]
    return "; ".join(f"with {n}: {before.get(n, '(none)')} -> {after.get(n, '(none)')}" for n in changed)


def _field_lines(f: FieldChange, head: str, indent: str) -> list[str]:
    """A text field as a full line diff: every line of both sides, `-` old, `+` new, ` ` both."""
    if not _is_text(f):
        return [head + _change_text(f)]
    return [f"{head}{f.field}:", *text_diff(f.old, f.new, indent)]


def text_diff(old: str | None, new: str | None, indent: str) -> list[str]:
    before = old.split("\n") if old is not None else []
    after = new.split("\n") if new is not None else []
    lines = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal":
            lines += [f"{indent}  {visible(line)}".rstrip() for line in before[a1:a2]]
            continue
        lines += [f"{indent}- {visible(line)}".rstrip() for line in before[a1:a2]]
        lines += [f"{indent}+ {visible(line)}".rstrip() for line in after[b1:b2]]
    if old is None:
        lines.insert(0, f"{indent}(absent before)")
    if new is None:
        lines.append(f"{indent}(absent now)")
    return lines


def _value(value: Any, field: str = "") -> str:
    """A field's value on one line, in full: durations as written, schemas as types."""
    if value is None:
        return "(none)"
    if isinstance(value, int) and not isinstance(value, bool) and field.endswith(("timeoutMs", "backoffMs")):
        return duration(value)
    if isinstance(value, str) and value.startswith("sha256:") and field.endswith(("sha256", "planHash")):
        return short_hash(value)  # the content or the child's own diff follows
    if field.endswith(("schema", "Schema")) and isinstance(value, dict):
        return schema_text(value)
    return visible(json.dumps(value, ensure_ascii=False, sort_keys=True))


# -- Markdown ------------------------------------------------------------------------------------


def render_markdown(results: list[WorkflowDiff], revision: str, how_to_see_all: str) -> str:
    from akmc.render import markdown  # late: with html and unicodedata about 9 ms, which only the markdown format needs

    document = markdown.Document(markdown.escape(summary(results, revision)))
    for item in results:
        if item.status == "equal":
            continue
        if item.status == "changed" and item.diff is not None:
            n = _count(item.diff)
            title = f"{item.path}: {n} change{'s' * (n != 1)}"
        else:
            title = f"{item.path}: workflow {item.status}"
        document.details(title, [_marker_first(line) for line in _workflow_lines(item)], info="diff")
    return document.render(how_to_see_all)


def _marker_first(line: str) -> str:
    """`    + text` as `+    text`, so that a `diff` code block colours added and removed lines."""
    body = line.lstrip(" ")
    if body[:2] in ("+ ", "- ") or body in ("+", "-"):
        return body[0] + line[: len(line) - len(body)] + body[1:]
    return " " + line
