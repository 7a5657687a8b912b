"""The short summary of a plan (`akmc plan --summary`): the shape of what will run, without command,
prompt, approval or script bodies, for logs that must never carry them (`akmc plan` shows everything)."""

from __future__ import annotations

import json
from typing import Any

from akm_run.durations import format_ms
from akmc.render.characters import visible

_TYPES = {"string": "string", "integer": "int", "number": "number", "boolean": "bool", "null": "null"}
duration = format_ms  # milliseconds as the language writes them: 2h, 1h30m, 90s → 1m30s, 250ms


def value(data: Any) -> str:
    """A JSON value on one line, in full, with every character a reader could miss spelled out."""
    return visible(json.dumps(data, ensure_ascii=False, sort_keys=True))


def binding_text(binding: dict[str, Any]) -> str:
    """What a child-workflow binding is given, as the source writes it: `params.version`,
    `steps.build.output.path`, `item.name` (the map's element), or a literal value."""
    return str(binding["from"]) if binding["kind"] in ("reference", "item") else value(binding["value"])


def schema_text(schema: dict[str, Any]) -> str:
    """A JSON Schema produced by akmc, written back as an akm type."""
    if not schema:
        return "any"
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(schema_text(s) for s in schema["anyOf"])
    kind = schema.get("type")
    if kind == "array":
        return f"list[{schema_text(schema.get('items', {}))}]" + _refinements(schema)
    if kind == "object" and "additionalProperties" in schema:
        return f"map[{schema_text(schema['additionalProperties'])}]"
    if kind == "object":
        required = set(schema.get("required", []))
        fields = ", ".join(
            f"{name}{'' if name in required else '?'}: {schema_text(sub)}"
            for name, sub in schema.get("properties", {}).items()
        )
        return "{ " + fields + " }" if fields else "{}"
    return _TYPES.get(str(kind), str(kind)) + _refinements(schema)


_REFINEMENTS = {
    "pattern": "pattern",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minimum": "min",
    "maximum": "max",
    "minItems": "min_items",
    "maxItems": "max_items",
}


def _refinements(schema: dict[str, Any]) -> str:
    shown = [f"{name}: {json.dumps(schema[key])}" for key, name in _REFINEMENTS.items() if key in schema]
    return f"({', '.join(shown)})" if shown else ""


def short_hash(digest: str) -> str:
    return digest[: len("sha256:") + 12] + "…"


def _target(target: dict[str, Any]) -> tuple[str, str]:
    kind = target["kind"]
    if kind == "shell":
        lines = target["command"].count("\n") + 1
        return "shell", f"{lines} line{'s' if lines != 1 else ''}"
    if kind == "script":
        return "script", f"{target['path']} ({short_hash(target['sha256'])})"
    if kind == "agent":
        if "path" in target:
            return "agent", target["path"]
        lines = target["instructions"].count("\n") + 1
        return "agent", f"inline, {lines} line{'s' if lines != 1 else ''}"
    if kind == "approval":
        return "approval", ""
    return "child-workflow", f"-> {target['ref']} (plan {short_hash(target['planHash'])})"


def _env(env: list[dict[str, Any]]) -> str:
    shown = []
    for entry in env:
        if entry["kind"] == "literal":
            shown.append(f"{entry['name']}={value(entry['value'])}")
        elif entry["kind"] == "secret":
            shown.append(f"{entry['name']}=secret({entry['secret']})")
        else:
            shown.append(f"{entry['name']}=passthrough")
    return ", ".join(shown)


def step_line(step: dict[str, Any], width: int = 0, number: str = "") -> str:
    """One step as the summary shows it: `2. review  [map agent]  over … (concurrency 8)`."""
    if step["kind"] == "route":
        cases = [f"{value(c['match'])} -> {c['next']}" for c in step["cases"]]
        if "default" in step:
            cases.append(f"_ -> {step['default']}")
        label, detail = "route", f"{step['input']}: {', '.join(cases)}"
    elif step["kind"] == "parallel":
        label, detail = "parallel", block_runs(step)
    else:
        label, detail = _target(step["target"])
        if step["kind"] == "map":
            label = f"map {label}"
            keeps_going = ", fail_fast false" if step.get("failFast") is False else ""
            over = f"over {step['over']} (concurrency {step['concurrency']}{keeps_going})"
            detail = over + (f", {detail}" if detail else "")
        if "gate" in step:
            detail += f", gate max_loops {step['gate']['maxLoops']}"
        if "isolation" in step:
            detail += f", isolation {step['isolation']}"
        if "env" in step:
            detail += f"   env: {_env(step['env'])}"
    number = number or f"{step['index'] + 1}."
    return f"{number} {step['stepId'].ljust(width)}  [{label}]  {detail}".rstrip()


def block_runs(step: dict[str, Any]) -> str:
    """How a `parallel` block runs its members: `2 at a time, fail_fast false: every member runs`."""
    at_once = f"{step['concurrency']} at a time" if "concurrency" in step else "every member at once"
    return at_once + (", fail_fast false: every member runs" if step.get("failFast") is False else "")


def member_number(number: str, position: int) -> str:
    """A member's number under its block's (`4.` → `4.1`, `1.2.` → `1.2.1`), as `akmc plan` numbers it."""
    return f"{number.rstrip('.')}.{position}"


def _steps(plan: dict[str, Any], indent: str, prefix: str) -> list[str]:
    lines = []
    width = max((len(s["stepId"]) for s in plan["steps"]), default=0)
    for step in plan["steps"]:
        lines += _step_lines(step, indent, f"{prefix}{step['index'] + 1}.", width)
    return lines


def _step_lines(step: dict[str, Any], indent: str, number: str, width: int) -> list[str]:
    """A step's line; below it a block's members, or what a child workflow is given, exports and runs."""
    lines = [indent + step_line(step, width, number)]
    sub = indent + "     "
    if step["kind"] == "parallel":
        members = step["members"]
        inner = max(len(m["stepId"]) for m in members)
        for position, member in enumerate(members, start=1):
            lines += _step_lines(member, sub, member_number(number, position), inner)
        return lines
    target = step.get("target", {})
    if target.get("kind") == "child-workflow":
        child = target["plan"]
        if target.get("bindings"):
            bound = ", ".join(f"{b['name']} <- {binding_text(b)}" for b in target["bindings"])
            lines.append(f"{sub}with: {bound}")
        lines.append(f"{sub}exports: {', '.join(child.get('outputs', {})) or 'runId, status'}")
        lines += _steps(child, sub, number if number.endswith(".") else number + ".")
    return lines


def limits_text(limits: dict[str, Any]) -> str:
    """The plan's limits as the language writes them: `concurrency 4, timeout 1h, exclusive per params.env`."""
    shown = [f"concurrency {limits['concurrency']}"]
    if "maxUnits" in limits:
        shown.append(f"max_units {limits['maxUnits']}")
    if "maxTokens" in limits:
        shown.append(f"max_tokens {limits['maxTokens']:,}")
    if "timeoutMs" in limits:
        shown.append(f"timeout {duration(limits['timeoutMs'])}")
    exclusive = limits.get("exclusive")
    if exclusive is not None:
        shown.append("exclusive" if exclusive is True else f"exclusive per params.{exclusive['param']}")
    return ", ".join(shown)


def render(plan: dict[str, Any], digest: str) -> str:
    params = []
    for name, param in plan.get("params", {}).items():
        text = f"{name}: {schema_text(param['schema'])}"
        text += f" = {value(param['default'])}" if "default" in param else " (required)"
        params.append(text)
    outputs = [f"{name} <- {output['from']}" for name, output in plan.get("outputs", {}).items()]
    lines = [
        f"workflow: {plan['ref']}  {value(plan['title'])}",
        f"plan:     irVersion {plan['irVersion']}, {short_hash(digest)} (not published)",
        f"limits:   {limits_text(plan['limits'])}",
        f"params:   {', '.join(params) or 'none'}",
        f"outputs:  {', '.join(outputs) or 'none (exports runId, status)'}",
        "steps:",
        *_steps(plan, "  ", ""),
        "read set:",
        *(f"  {entry['path']}" for entry in plan["sourceReadSet"]),
    ]
    return "\n".join(lines) + "\n"
