"""The full review of a plan (`akmc plan`): everything that affects a run, per step and per child, never cut.

Text is shown byte for byte: a long or multi-line text is an indented block of `| ` lines (a text
ending in a newline ends with an empty `|` line), and characters that would hide in a terminal or a
browser (control and format characters such as bidi overrides or zero-width spaces, unusual spaces,
trailing whitespace) are shown as `⟨U+XXXX⟩`."""

from __future__ import annotations

from typing import Any

from akm_run.features import every_step
from akm_run.needs import notifier
from akm_run.needs import summary as needs_of
from akmc.render.characters import visible
from akmc.render.summary import binding_text, duration, limits_text, member_number, schema_text, value

INLINE_WIDTH = 100


def text_lines(label: str, text: str, indent: str) -> list[str]:
    """`label: text` when it is one short plain line, else `label:` and the text as a `| ` block
    (an empty text is one empty `|` line, so it never looks like a text of two quotes)."""
    if "\n" not in text and text == text.strip() and 0 < len(text) <= INLINE_WIDTH:
        return [f"{indent}{label}: {visible(text)}"]
    return [f"{indent}{label}:", *block(text, indent + "  ")]


def block(text: str, indent: str) -> list[str]:
    return [f"{indent}| {visible(line)}".rstrip() for line in text.split("\n")]


def param_line(name: str, param: dict[str, Any]) -> str:
    text = f"{name}: {schema_text(param['schema'])}"
    text += f" = {value(param['default'])}" if "default" in param else " (required)"
    if "description" in param:
        text += f"  -- {value(param['description'])}"
    return text


def output_line(name: str, output: dict[str, Any]) -> str:
    typed = f": {schema_text(output['schema'])}" if "schema" in output else ""
    return f"{name}{typed} <- {output['from']}"


def retry_text(retry: dict[str, Any]) -> str:
    text = f"max {retry['max']}, on {', '.join(retry['on'])}"
    return text + (f", backoff {duration(retry['backoffMs'])}" if "backoffMs" in retry else "")


def env_line(entry: dict[str, Any]) -> str:
    if entry["kind"] == "literal":
        return f"{entry['name']} = {value(entry['value'])}"
    if entry["kind"] == "secret":
        return f"{entry['name']} = secret({value(entry['secret'])})"
    return f"{entry['name']} = passthrough"


def label(step: dict[str, Any]) -> str:
    """`[shell]`, `[map agent]`, `[route]`, `[child-workflow]`."""
    if step["kind"] in ("route", "parallel"):
        return f"[{step['kind']}]"
    kind = step["target"]["kind"]
    return f"[map {kind}]" if step["kind"] == "map" else f"[{kind}]"


def step_header(step: dict[str, Any], number: str = "") -> str:
    number = number or f"{step['index'] + 1}."
    return f"{number} {step['stepId']}  {label(step)}"


def target_lines(target: dict[str, Any], indent: str) -> list[str]:
    kind = target["kind"]
    if kind == "shell":
        return text_lines("command", target["command"], indent)
    if kind == "script":
        return [f"{indent}script: {visible(target['path'])}  {target['sha256']}"]
    if kind == "approval":
        return text_lines("approval text", target["message"], indent)
    if kind == "agent":
        source = f" (file {visible(target['path'])})" if "path" in target else ""
        return text_lines(f"prompt{source}", target["instructions"], indent)
    lines = [f"{indent}workflow: {visible(target['ref'])}  {target['planHash']}"]
    lines += [f"{indent}with {binding['name']} <- {binding_text(binding)}" for binding in target.get("bindings", [])]
    return lines


def step_lines(step: dict[str, Any], indent: str, number: str = "") -> list[str]:
    """A step's header and, below it, every setting that affects how it runs; a child workflow's
    plan follows recursively."""
    number = number or f"{step['index'] + 1}."
    lines = [indent + step_header(step, number)]
    sub = indent + "     "
    if step["kind"] == "parallel":
        return lines + _block_lines(step, sub, number)
    if step["kind"] == "route":
        lines.append(f"{sub}on: {step['input']}")
        lines += [f"{sub}{value(case['match'])} -> {case['next']}" for case in step["cases"]]
        if "default" in step:
            lines.append(f"{sub}_ -> {step['default']}")
    else:
        if step["kind"] == "map":
            keeps_going = ", fail_fast false: every item runs" if step.get("failFast") is False else ""
            lines.append(f"{sub}over: {step['over']}  (concurrency {step['concurrency']}{keeps_going})")
        lines += target_lines(step["target"], sub)
    if "inputs" in step:
        lines.append(f"{sub}inputs: {', '.join(step['inputs'])}")
    if "outputSchema" in step:
        lines.append(f"{sub}output: {schema_text(step['outputSchema'])}")
    if "gate" in step:
        lines.append(f"{sub}gate: max_loops {step['gate']['maxLoops']}, check [{step['gate']['check']['kind']}]")
        lines += target_lines(step["gate"]["check"], sub + "  ")
    if "timeoutMs" in step:
        lines.append(f"{sub}timeout: {duration(step['timeoutMs'])}")
    if "maxTokens" in step:
        lines.append(f"{sub}max_tokens: {step['maxTokens']:,}")
    if "retry" in step:
        lines.append(f"{sub}retry: {retry_text(step['retry'])}")
    if "stallAfterMs" in step:
        lines.append(f"{sub}stall_after: {duration(step['stallAfterMs'])}, on_stall {step.get('onStall', 'warn')}")
    lines.append(f"{sub}on_error: {step['onError']}")
    if "isolation" in step:
        lines.append(
            f"{sub}isolation: {step['isolation']}  (each attempt in its own git worktree at the run's base commit)"
        )
    if "env" in step:
        lines.append(f"{sub}env:")
        lines += [f"{sub}  {env_line(entry)}" for entry in step["env"]]
    target = step.get("target", {})
    if target.get("kind") == "child-workflow":  # its steps under the step's number: 2.1., or 4.1.1. under 4.1
        lines.append(f"{sub}{_title(target['plan'])}")
        lines += _body(target["plan"], sub + "  ", number if number.endswith(".") else number + ".")
    return lines


def _block_lines(step: dict[str, Any], sub: str, number: str) -> list[str]:
    """A `parallel` block's settings, then its members numbered under it (`4.1`, `4.2`, …)."""
    at_once = f"{step['concurrency']} at a time" if "concurrency" in step else "every member at once"
    keeps_going = ", fail_fast false: every member runs" if step.get("failFast") is False else ""
    lines = [f"{sub}runs: {at_once}{keeps_going}", f"{sub}on_error: {step['onError']}"]
    for position, member in enumerate(step["members"], start=1):
        if isinstance(member, str):  # a diff lists a block's members by id, each a step of its own
            lines.append(f"{sub}{member_number(number, position)} {member}")
        else:
            lines += step_lines(member, sub, member_number(number, position))
    return lines


def _title(plan: dict[str, Any]) -> str:
    return f"workflow {visible(plan['ref'])}  {value(plan['title'])}"


def head_lines(plan: dict[str, Any], indent: str) -> list[str]:
    """Description, limits, params and outputs: what applies to the whole workflow."""
    lines = []
    if "description" in plan:
        lines += text_lines("description", plan["description"], indent)
    lines.append(f"{indent}limits: {limits_text(plan['limits'])}")
    params = plan.get("params", {})
    lines.append(f"{indent}params:" + ("" if params else " none"))
    lines += [f"{indent}  {param_line(name, p)}" for name, p in params.items()]
    outputs = plan.get("outputs", {})
    lines.append(f"{indent}outputs:" + ("" if outputs else " none (exports runId, status)"))
    lines += [f"{indent}  {output_line(name, o)}" for name, o in outputs.items()]
    if "notify" in plan:
        lines += notify_lines(plan["notify"], indent)
    return lines


def notify_lines(notify: dict[str, Any], indent: str) -> list[str]:
    """The `notify` section: its events, its notifier and how it is bounded."""
    lines = [f"{indent}notify: on {', '.join(notify['on'])}  [{notify['target']['kind']}]"]
    lines += target_lines(notify["target"], indent + "  ")
    if "timeoutMs" in notify:
        lines.append(f"{indent}  timeout: {duration(notify['timeoutMs'])}")
    if "retry" in notify:
        lines.append(f"{indent}  retry: {retry_text(notify['retry'])}")
    if "env" in notify:
        lines.append(f"{indent}  env:")
        lines += [f"{indent}    {env_line(entry)}" for entry in notify["env"]]
    return lines


def needs_lines(plan: dict[str, Any], indent: str) -> list[str]:
    """What a host must provide to run the plan and its children, as `akm-run preflight` checks it."""
    found, notified = needs_of(plan), notifier(plan)
    if not found and not notified:
        return [f"{indent}needs: nothing from the host"]
    lines = [f"{indent}needs:"]
    if "secret" in found:
        lines.append(f"{indent}  secrets: {', '.join(found['secret'])}")
    if "passthrough" in found:
        lines.append(f"{indent}  passthrough: {', '.join(found['passthrough'])}")
    if "agent" in found:
        lines.append(f"{indent}  an agent command")
    if "interpreter" in found:
        lines.append(f"{indent}  interpreters: {', '.join(visible(i) for i in found['interpreter'])}")
    if "git" in found:
        lines.append(f"{indent}  a git work tree")
    if notified:  # the notify section's: secrets HOOK; program curl
        said = "; ".join(f"{key} {', '.join(visible(n) for n in names)}" for key, names in notified.items())
        lines.append(f"{indent}  notifier: {said}")
    return lines


def _body(plan: dict[str, Any], indent: str, prefix: str) -> list[str]:
    lines = [*head_lines(plan, indent), *(needs_lines(plan, indent) if not prefix else []), f"{indent}steps:"]
    for step in plan["steps"]:
        lines += step_lines(step, indent + "  ", f"{prefix}{step['index'] + 1}.")
    return lines


def read_set_lines(plan: dict[str, Any], indent: str) -> list[str]:
    return [
        f"{indent}{visible(e['path'])}" + (f"  {e['sha256']}" if "sha256" in e else "") for e in plan["sourceReadSet"]
    ]


def render(plan: dict[str, Any], digest: str) -> str:
    lines = [
        _title(plan),
        f"plan hash: {digest}",
        *_body(plan, "", ""),
        "read set:",
        *read_set_lines(plan, "  "),
    ]
    return "\n".join(lines) + "\n"


def count_steps(plan: dict[str, Any]) -> tuple[int, int]:
    """(steps, child workflows) at every level: a `parallel` block and each of its members are steps,
    as a run journals them, and a member's child counts as any step's does."""
    steps = children = 0
    for step in every_step(plan):
        steps += 1
        if step.get("target", {}).get("kind") == "child-workflow":
            more, deeper = count_steps(step["target"]["plan"])
            steps, children = steps + more, children + 1 + deeper
    return steps, children


def render_markdown(plan: dict[str, Any], digest: str) -> str:
    from akmc.render import markdown  # late: with html and unicodedata about 9 ms, which only the markdown format needs

    steps, children = count_steps(plan)
    summary = f"**{markdown.escape(plan['ref'])}** {markdown.escape(value(plan['title']))}: "
    summary += f"{steps} step{'s' * (steps != 1)} at every level"
    summary += f", {children} child workflow{'s' * (children != 1)}" if children else ""
    document = markdown.Document(summary + f", plan `{digest}`")
    document.details("workflow", [*head_lines(plan, ""), *needs_lines(plan, "")], open_=True)
    for step in plan["steps"]:
        document.details(step_header(step), [line[5:] for line in step_lines(step, "")[1:]])
    document.details("read set", read_set_lines(plan, ""))
    return document.render(f"run `akmc plan {plan['ref']}.akm` to see everything")
