"""What a plan needs from the host that runs it, computed from the plan alone.

`akmc plan` lists these needs for a reviewer; `akm-run preflight` checks each of them against the
host (akm_run.preflight). Both read this one computation, so a reviewer and an operator see the
same list. Only names are kept here, never a value.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

NeedKind = Literal["secret", "passthrough", "agent", "interpreter", "git"]
NEED_KINDS: tuple[NeedKind, ...] = ("secret", "passthrough", "agent", "interpreter", "git")


@dataclass(frozen=True, slots=True)
class Condition:
    """A need that holds only when a route selects one of its targets."""

    route: str  # the route step's path
    selects: str  # the step it must select

    def text(self) -> str:
        return f"route `{self.route}` selects `{self.selects}`"


@dataclass(frozen=True, slots=True)
class Need:
    """One thing one step needs: a secret or passthrough name, an agent command, an interpreter, a
    git work tree (its attempts run in worktrees).

    `place` is the spine position of the step at every level (top-level index first), `step_path`
    its name (`deploy/workflows/child:hi`), `condition` set when a route may skip the step."""

    kind: NeedKind
    name: str
    place: tuple[int, ...]
    step_path: str
    condition: Condition | None = None
    interpreter: Interpreter | None = None


@dataclass(frozen=True, slots=True)
class Interpreter:
    """A script's `#!` line: an absolute program, or a NAME that `/usr/bin/env` finds on PATH."""

    program: str
    via_env: str | None = None

    def text(self) -> str:
        return f"{self.program} {self.via_env}" if self.via_env is not None else self.program


def interpreter(script: str) -> Interpreter | None:
    """The interpreter a script's first line names (None when it has no `#!` line)."""
    if not script.startswith("#!"):
        return None
    line = script[2:].split("\n", 1)[0].strip()
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    if not words:
        return Interpreter("")
    program, rest = words[0], words[1:]
    if program.rsplit("/", 1)[-1] != "env":
        return Interpreter(program)
    names = [w for w in _env_words(rest) if "=" not in w]
    return Interpreter(program, names[0] if names else "")


# Words a shell command line may start with that name no program on PATH: the shell's keywords and
# special builtins, which it runs itself.
SHELL_WORDS = frozenset(
    {"!", "{", "(", "if", "for", "while", "until", "case", ".", ":", "cd", "eval", "exec", "export", "set", "trap"}
    | {"unset", "readonly", "shift", "return", "exit", "wait", "umask", "read", "command", "builtin", "local"}
)


def first_word(command: str) -> str | None:
    """The first word of a `/bin/sh -c` command line after any `NAME=value` assignments."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        words = words[1:]
    return words[0] if words else None


def program(command: str) -> str | None:
    """The program a `/bin/sh -c` command line starts; None when it names none the host must have
    (nothing, a shell keyword or builtin, an expansion)."""
    word = first_word(command)
    if word is None or word in SHELL_WORDS or "$" in word or "`" in word:
        return None
    return word


def notifier(plan: Mapping[str, Any]) -> dict[str, list[str]]:
    """What the plan's `notify` section needs from the host (nothing without one): its `secrets`, its
    script's `interpreter`, or the `program` its shell command starts."""
    section = plan.get("notify")
    if section is None:
        return {}
    found = {"secrets": sorted({e["secret"] for e in section.get("env", []) if e["kind"] == "secret"})}
    target = section["target"]
    if target["kind"] == "script" and (named := interpreter(target["text"])) is not None:
        found["interpreter"] = [named.text()]
    elif target["kind"] == "shell" and (started := program(target["command"])) is not None:
        found["program"] = [started]
    return {key: names for key, names in found.items() if names}


def _env_words(words: list[str]) -> list[str]:
    """The words of `env`'s command line after its options (`-S` splits the rest again)."""
    out: list[str] = []
    for word in words:
        if out or not word.startswith("-"):
            out.append(word)
        elif word.startswith("-S") and len(word) > 2:
            out += word[2:].split()
    return out


def _targets(step: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    if "target" in step:
        yield step["target"]
    if "gate" in step:
        yield step["gate"]["check"]


def _conditions(plan: Mapping[str, Any], prefix: str, runs: Callable[[str], bool]) -> dict[str, Condition]:
    """Step id → the route that may skip it: a later target of a route with two or more targets that
    can still run (a route that already chose has skipped the others)."""
    conditional: dict[str, Condition] = {}
    for step in plan["steps"]:
        if step["kind"] != "route" or not runs(step["stepId"]):
            continue
        targets = [c["next"] for c in step["cases"]] + ([step["default"]] if "default" in step else [])
        if len(set(targets)) < 2:
            continue
        later = {s["stepId"] for s in plan["steps"] if s["index"] > step["index"]}
        for target in dict.fromkeys(targets):
            if target in later:
                conditional.setdefault(target, Condition(prefix + step["stepId"], prefix + target))
    return conditional


def needs(plan: Mapping[str, Any], runs: Callable[[str], bool] = lambda step_id: True) -> list[Need]:
    """Every need of the plan's steps that can still run (`runs` says which top-level steps can;
    embedded child plans are counted whole), in spine order."""
    return list(_walk(plan, (), "", None, runs))


def _walk(
    plan: Mapping[str, Any],
    place: tuple[int, ...],
    prefix: str,
    outer: Condition | None,
    runs: Callable[[str], bool],
) -> Iterator[Need]:
    conditional = _conditions(plan, prefix, runs)
    for block in plan["steps"]:  # a `parallel` block's members are at its place, under its route
        for step in (block, *block.get("members", [])):
            if runs(step["stepId"]):
                here = (*place, block["index"])
                yield from _step(step, here, prefix + step["stepId"], outer or conditional.get(block["stepId"]))


def _step(step: Mapping[str, Any], here: tuple[int, ...], path: str, condition: Condition | None) -> Iterator[Need]:
    for entry in step.get("env", []):
        if entry["kind"] == "secret":
            yield Need("secret", entry["secret"], here, path, condition)
        elif entry["kind"] == "passthrough":
            yield Need("passthrough", entry["name"], here, path, condition)
    if "isolation" in step:
        yield Need("git", "", here, path, condition)
    for target in _targets(step):
        if target["kind"] == "agent":
            yield Need("agent", "", here, path, condition)
        elif target["kind"] == "script" and (found := interpreter(target["text"])) is not None:
            yield Need("interpreter", found.text(), here, path, condition, found)
        elif target["kind"] == "child-workflow" and "plan" in target:  # a diff's child stands alone
            yield from _walk(target["plan"], here, f"{path}/{target['ref']}:", condition, lambda step_id: True)


def summary(plan: Mapping[str, Any]) -> dict[NeedKind, list[str]]:
    """The distinct needs of a plan by kind, each list sorted (the agent's and git's are `[""]` when
    needed)."""
    found: dict[NeedKind, set[str]] = {kind: set() for kind in NEED_KINDS}
    for need in needs(plan):
        found[need.kind].add(need.name)
    return {kind: sorted(names) for kind, names in found.items() if names}
