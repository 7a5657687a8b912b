"""The wording of `akm-run preflight` (akm_run.preflight): what a host lacks, by name, never by value.
Part of the wording registry: akm_run.wording re-exports every template here."""

from __future__ import annotations

from akm_run.exitcodes import PREFLIGHT
from akm_run.templates import error, words

__all__ = [
    "agent_command_empty",
    "agent_program_missing",
    "base_commit_missing",
    "configure_an_agent",
    "does_not_exist",
    "fetch_the_base_commit",
    "fix_the_interpreter",
    "fix_the_notifier",
    "fix_the_notify_cmd",
    "given_workdir",
    "install_the_agent",
    "interpreter_missing",
    "interpreter_names_nothing",
    "interpreter_not_absolute",
    "interpreter_not_on_path",
    "needed_only_if",
    "no_agent_command",
    "no_git_work_tree",
    "not_executable",
    "not_on_path",
    "notifier_missing",
    "notify_cmd_empty",
    "notify_cmd_missing",
    "pass_a_state_dir",
    "pass_a_workdir",
    "passthrough_unset",
    "preflight_failed",
    "preflight_failed_on_worker",
    "preflight_failed_unchanged",
    "preflight_failed_unpublished",
    "preflight_ok",
    "preflight_skipped",
    "remembered_workdir",
    "report_usage",
    "secret_empty",
    "secret_unset",
    "set_the_passthrough",
    "set_the_secret",
    "state_unwritable",
    "usage_unmetered",
    "use_a_git_work_tree",
    "workdir_missing",
]


# -- preflight (akm_run.preflight): what a host lacks, by name, never by value -------------------


@error(PREFLIGHT, "preflight failed: nothing was published")  # then every finding, two lines each
def preflight_failed_unpublished() -> None: ...
@error(PREFLIGHT, "preflight failed: run {run} was not changed")
def preflight_failed_unchanged(*, run: str) -> None: ...
@error(PREFLIGHT, "preflight failed on worker {worker}: nothing was dispatched, run {run} stays active:{findings}")
def preflight_failed_on_worker(*, worker: str, run: str, findings: str) -> None: ...
@error(PREFLIGHT, "preflight failed: {errors} error(s)")
def preflight_failed(*, errors: int) -> None: ...
@words("warning: --no-preflight: the host is not checked before the run starts")
def preflight_skipped() -> None: ...
@words("preflight: ok")
def preflight_ok() -> None: ...
@words("{message}; needed only if {condition}")
def needed_only_if(*, message: str, condition: str) -> None: ...
@words("secret `{name}` is not set")
def secret_unset(*, name: str) -> None: ...
@words("secret `{name}` is set but empty")
def secret_empty(*, name: str) -> None: ...
@words("set {name} in the environment akm-run starts in (preflight never shows its value)")
def set_the_secret(*, name: str) -> None: ...
@words("passthrough `{name}` is not set: the unit starts without it")
def passthrough_unset(*, name: str) -> None: ...
@words("set {name} in the environment akm-run starts in, if the unit needs it")
def set_the_passthrough(*, name: str) -> None: ...
@words("an agent step can run, but no agent command is configured")
def no_agent_command() -> None: ...
@words("the agent command names no program")
def agent_command_empty() -> None: ...
@words("pass --agent-cmd or set AKM_AGENT_CMD")
def configure_an_agent() -> None: ...
@words("the agent command's program `{program}` {why}")
def agent_program_missing(*, program: str, why: str) -> None: ...
@words("install `{program}`, or pass --agent-cmd with a program this host has")
def install_the_agent(*, program: str) -> None: ...
@words("is not on PATH")
def not_on_path() -> None: ...
@words("does not exist")
def does_not_exist() -> None: ...
@words("is not an executable file")
def not_executable() -> None: ...
@words("the script's interpreter `#!{line}` is not an absolute path")
def interpreter_not_absolute(*, line: str) -> None: ...
@words("the script's interpreter `{program}` {why}")
def interpreter_missing(*, program: str, why: str) -> None: ...
@words("the script's `#!{line}` names no program")
def interpreter_names_nothing(*, line: str) -> None: ...
@words("`{name}` (the script's `#!{line}`) is not on PATH")
def interpreter_not_on_path(*, name: str, line: str) -> None: ...
@words("install the interpreter on this host, or change the script's `#!` line and compile again")
def fix_the_interpreter() -> None: ...
@words("{workdir} is not a directory")
def workdir_missing(*, workdir: str) -> None: ...
@words("pass --workdir with an existing directory")
def pass_a_workdir() -> None: ...
@words("steps run in git worktrees, but {workdir} cannot give them a base commit: {reason}")
def no_git_work_tree(*, workdir: str, reason: str) -> None: ...
@words("run akm-run in a git checkout that has a commit, or pass --workdir with one")
def use_a_git_work_tree() -> None: ...
@words("the run's base commit {commit} is not in the repository of {workdir}")
def base_commit_missing(*, commit: str, workdir: str) -> None: ...
@words("fetch {commit} into that repository (a clone that is behind), or pass --workdir with one that has it")
def fetch_the_base_commit(*, commit: str) -> None: ...
@words("state directory {directory} cannot be written (read-only or not permitted)")
def state_unwritable(*, directory: object) -> None: ...
@words("pass --state-dir or set AKM_STATE_DIR to a writable directory")
def pass_a_state_dir() -> None: ...
@words("--workdir {workdir}")
def given_workdir(*, workdir: object) -> None: ...
@words("the run's workdir {workdir}")
def remembered_workdir(*, workdir: object) -> None: ...


# -- preflight's `usage` check (token budgets, operations.md D8) ---------------------------------


@words("the plan has token budgets (max_tokens): they bind only if the agent command reports usage")
def usage_unmetered() -> None: ...
@words(
    'have the agent command (or its adapter) write {{"usage": {{"input_tokens": N, "output_tokens": N}}}} lines to $AKM_PROGRESS'
)
def report_usage() -> None: ...
@words("the notify command's program `{program}` {why}")
def notifier_missing(*, program: str, why: str) -> None: ...
@words("install `{program}` on this host, or change the workflow's notify section and compile again")
def fix_the_notifier(*, program: str) -> None: ...
@words("--notify-cmd names no program")
def notify_cmd_empty() -> None: ...
@words("the --notify-cmd program `{program}` {why}")
def notify_cmd_missing(*, program: str, why: str) -> None: ...
@words("pass --notify-cmd (or set AKM_RUN_NOTIFY_CMD) with a program this host has")
def fix_the_notify_cmd() -> None: ...
