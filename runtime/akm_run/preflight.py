"""Preflight: check the host against what a plan needs before anything is published or dispatched.

The checks are a closed list (docs/runtime.md, "Preflight"), kept in CHECKS in the order they are
reported: one function per check, each reading the plan's needs (akm_run.needs) and the host.
The checks that come with their own features (`git` for worktrees, `usage` for token budgets,
`notify` for notifications) are in CHECKS with the rest. A finding names a variable, a program, a
directory or a commit, never a value.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from akm_run import wording, worktrees
from akm_run.needs import Interpreter, Need, NeedKind, first_word, interpreter, needs
from akm_run.needs import program as needs_program
from akm_run.rows import StepRow
from akm_run.sqlitestore import writable
from akm_run.units import DEFAULT_PATH

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the host lacks. `step_path` is None for a finding about the whole run."""

    check: str
    severity: Severity
    step_path: str | None
    message: str
    hint: str
    place: tuple[int, ...] = ()

    def document(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "stepPath": self.step_path,
            "message": self.message,
            "hint": self.hint,
        }


@dataclass(frozen=True, slots=True)
class Host:
    """What the checks look at: the environment akm-run reads, where units run and with which agent
    command, and the state directory (None on a shared store, whose writes the database answers)."""

    environ: Mapping[str, str]
    workdir: Path
    workdir_named: str  # how a message names the workdir: `--workdir D`, `the run's workdir D`
    agent_cmd: str | None
    state_dir: Path | None = None
    base_commit: str | None = None  # an existing run's: the workdir's repository must hold it
    git: bool = True  # False: the workdir is another host's to check (an existing run on the pool)
    notify_cmd: str | None = None  # the host's notifier (--notify-cmd, the run's, $AKM_RUN_NOTIFY_CMD)

    @property
    def path(self) -> str:
        """The PATH a unit is started with (akm_run.units.environment)."""
        return self.environ.get("PATH", DEFAULT_PATH)


@dataclass(frozen=True, slots=True)
class Subject:
    """What one preflight checks: the needs of the steps that can still run, on this host."""

    needs: list[Need]
    host: Host
    budgeted: bool = False  # the plan or a child it embeds sets `max_tokens`: its features say "tokens"
    notify: Mapping[str, Any] | None = None  # the plan's `notify` section

    def of(self, kind: NeedKind) -> dict[str, Need]:
        """Each distinct name of one kind of need, with the step reported for it: the first that
        needs it whatever a route selects, else the first that needs it at all."""
        chosen: dict[str, Need] = {}
        for need in self.needs:
            if need.kind == kind:
                held = chosen.get(need.name)
                if held is None or (held.condition is not None and need.condition is None):
                    chosen[need.name] = need
        return chosen


Check = Callable[[Subject], Iterable[Finding]]


def _at(check: str, need: Need, message: str, hint: str, severity: Severity = "error") -> Finding:
    """A finding about one step's need: an error of a step a route may skip is a warning."""
    if need.condition is not None and severity == "error":
        severity = "warning"
        message = wording.needed_only_if(message=message, condition=need.condition.text())
    return Finding(check, severity, need.step_path, message, hint, need.place)


def check_secret(subject: Subject) -> Iterable[Finding]:
    for name, need in subject.of("secret").items():
        if name not in subject.host.environ:
            yield _at("secret", need, wording.secret_unset(name=name), wording.set_the_secret(name=name))
        elif not subject.host.environ[name]:
            yield _at("secret", need, wording.secret_empty(name=name), wording.set_the_secret(name=name))


def check_passthrough(subject: Subject) -> Iterable[Finding]:
    for name, need in subject.of("passthrough").items():
        if name not in subject.host.environ:
            message, hint = wording.passthrough_unset(name=name), wording.set_the_passthrough(name=name)
            yield _at("passthrough", need, message, hint, "warning")


def check_agent(subject: Subject) -> Iterable[Finding]:
    need = subject.of("agent").get("")
    if need is None:
        return
    command = subject.host.agent_cmd or subject.host.environ.get("AKM_AGENT_CMD")
    if not command:
        yield _at("agent", need, wording.no_agent_command(), wording.configure_an_agent())
        return
    program = first_word(command)
    if program is None:
        yield _at("agent", need, wording.agent_command_empty(), wording.configure_an_agent())
    elif (missing := _unresolved(program, subject.host)) is not None:
        message = wording.agent_program_missing(program=program, why=missing)
        yield _at("agent", need, message, wording.install_the_agent(program=program))


def check_interpreter(subject: Subject) -> Iterable[Finding]:
    for name, need in subject.of("interpreter").items():
        message = _interpreter_missing(need.interpreter or Interpreter(name), subject.host)
        if message is not None:
            yield _at("interpreter", need, message, wording.fix_the_interpreter())


def _interpreter_missing(found: Interpreter, host: Host) -> str | None:
    """What is wrong with a script's `#!` line on this host (None: nothing)."""
    if not found.program.startswith("/"):
        return wording.interpreter_not_absolute(line=found.text())
    if (missing := _executable(Path(found.program))) is not None:
        return wording.interpreter_missing(program=found.program, why=missing)
    if found.via_env == "":
        return wording.interpreter_names_nothing(line=found.text())
    if found.via_env is not None and shutil.which(found.via_env, path=host.path) is None:
        return wording.interpreter_not_on_path(name=found.via_env, line=found.text())
    return None


def check_workdir(subject: Subject) -> Iterable[Finding]:
    if not subject.host.workdir.is_dir():
        message = wording.workdir_missing(workdir=subject.host.workdir_named)
        yield Finding("workdir", "error", None, message, wording.pass_a_workdir())


def check_git(subject: Subject) -> Iterable[Finding]:
    """Steps that run in worktrees: the workdir is in a git work tree whose HEAD names a commit (the
    base a new run freezes) and, for an existing run, its repository holds the run's base commit."""
    need, host = subject.of("git").get(""), subject.host
    if need is None or not host.git or not host.workdir.is_dir():  # a missing workdir: its own finding
        return
    try:
        worktrees.base(host.workdir)
    except worktrees.GitError as error:
        message = wording.no_git_work_tree(workdir=host.workdir_named, reason=str(error))
        yield _at("git", need, message, wording.use_a_git_work_tree())
        return
    if host.base_commit is not None and not worktrees.has_commit(host.workdir, host.base_commit):
        message = wording.base_commit_missing(commit=host.base_commit, workdir=host.workdir_named)
        yield _at("git", need, message, wording.fetch_the_base_commit(commit=host.base_commit))


def check_usage(subject: Subject) -> Iterable[Finding]:
    """A reminder, never an error: a token budget binds only through the usage lines an agent
    command reports, which no host check can see before a unit runs."""
    need = subject.of("agent").get("")
    if need is not None and subject.budgeted:
        yield _at("usage", need, wording.usage_unmetered(), wording.report_usage(), "info")


def check_notify(subject: Subject) -> Iterable[Finding]:
    """The notifiers a run would be sent to: the host's command, then the plan's `notify` section."""
    host = subject.host
    if host.notify_cmd is not None:
        hint = wording.fix_the_notify_cmd()
        if first_word(host.notify_cmd) is None:
            yield Finding("notify", "error", None, wording.notify_cmd_empty(), hint)
        elif (started := needs_program(host.notify_cmd)) and (missing := _unresolved(started, host)) is not None:
            yield Finding("notify", "error", None, wording.notify_cmd_missing(program=started, why=missing), hint)
    if subject.notify is not None:
        yield from _notify_section(subject.notify, host)


def _notify_section(section: Mapping[str, Any], host: Host) -> Iterable[Finding]:
    """The plan's notifier, checked as a unit is: its secrets, its script's interpreter, and the
    program its shell command starts."""
    for entry in section.get("env", []):
        if entry["kind"] == "secret" and not host.environ.get(name := entry["secret"]):
            unset = wording.secret_empty(name=name) if name in host.environ else wording.secret_unset(name=name)
            yield Finding("notify", "error", NOTIFY, unset, wording.set_the_secret(name=name))
    target = section["target"]
    if target["kind"] == "script" and (found := interpreter(target["text"])) is not None:
        if (message := _interpreter_missing(found, host)) is not None:
            yield Finding("notify", "error", NOTIFY, message, wording.fix_the_interpreter())
    elif target["kind"] == "shell" and (program := needs_program(target["command"])) is not None:
        if (missing := _unresolved(program, host)) is not None:
            message = wording.notifier_missing(program=program, why=missing)
            yield Finding("notify", "error", NOTIFY, message, wording.fix_the_notifier(program=program))


NOTIFY = "notify"  # the step path of the plan's notify section in a finding


def check_state(subject: Subject) -> Iterable[Finding]:
    directory = subject.host.state_dir
    if directory is not None and not writable(directory):
        yield Finding("state", "error", None, wording.state_unwritable(directory=directory), wording.pass_a_state_dir())


# The closed list, in the order findings of one step are reported.
CHECKS: tuple[tuple[str, Check], ...] = (
    ("secret", check_secret),
    ("passthrough", check_passthrough),
    ("agent", check_agent),
    ("interpreter", check_interpreter),
    ("workdir", check_workdir),
    ("git", check_git),
    ("usage", check_usage),
    ("notify", check_notify),
    ("state", check_state),
)
ORDER = {name: position for position, (name, _) in enumerate(CHECKS)}


def _unresolved(program: str, host: Host) -> str | None:
    """Why a program cannot be started from the workdir (None: it can)."""
    if "/" in program:
        return _executable(host.workdir / program)
    return None if shutil.which(program, path=host.path) is not None else wording.not_on_path()


def _executable(path: Path) -> str | None:
    if not path.exists():
        return wording.does_not_exist()
    if path.is_dir() or not os.access(path, os.X_OK):
        return wording.not_executable()
    return None


def check(plan: Mapping[str, Any], host: Host, rows: Iterable[StepRow] | None = None) -> list[Finding]:
    """Every finding for the plan on this host, in report order: run-wide findings first, then by
    spine position, then the member or child path, then the check. With `rows` (an existing run),
    only the steps that can still run are checked."""
    settled = {row.step_id for row in rows or () if row.status in ("completed", "skipped")}
    runs = needs(plan, lambda step_id: step_id not in settled)
    subject = Subject(runs, host, "tokens" in plan.get("features", ()), plan.get("notify"))
    found = [finding for _, each in CHECKS for finding in each(subject)]
    return sorted(found, key=lambda f: (f.place, f.step_path or "", ORDER[f.check]))


def failed(findings: Iterable[Finding]) -> bool:
    """Whether any finding is an error."""
    return any(finding.severity == "error" for finding in findings)


def document(findings: list[Finding]) -> dict[str, Any]:
    """The JSON document: `{ok, findings: [{check, severity, stepPath, message, hint}]}`."""
    return {"ok": not failed(findings), "findings": [finding.document() for finding in findings]}


def text(findings: list[Finding]) -> str:
    """The findings, two lines each: `severity [check] step: message`, then the hint."""
    lines = []
    for finding in findings:
        where = f"{finding.step_path}: " if finding.step_path is not None else ""
        lines += [f"{finding.severity} [{finding.check}] {where}{finding.message}", f"    hint: {finding.hint}"]
    return "".join(line + "\n" for line in lines)
