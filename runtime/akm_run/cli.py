"""The `akm-run` command line (argparse: the runtime installs almost nothing).

Each command parses its arguments and calls one function that returns an exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from akm_run import __version__, exitcodes, wording
from akm_run.console import as_given, state_dir, utf8
from akm_run.database_url import DatabaseError, select, unusable
from akm_run.migrations import NewerSchema
from akm_run.wording import Failure

EXAMPLES = {
    "run": "akm-run run plans/workflows/release.plan.json --param version=1.4.0",
    "status": "akm-run status 20261130T101500-3fa9c2d1 --format json",
    "list": "akm-run list --status blocked",
    "logs": "akm-run logs 20261130T101500-3fa9c2d1 greet --unit 2 --attempt 1",
    "resume": "akm-run resume 20261130T101500-3fa9c2d1",
    "approve": "akm-run approve 20261130T101500-3fa9c2d1 signoff --by alice --note 'notes checked'",
    "abandon": "akm-run abandon 20261130T101500-3fa9c2d1",
    "skip": "akm-run skip 20261130T101500-3fa9c2d1 lint --output '{\"ok\": true}' --note 'checked by hand'",
    "retry": "akm-run retry 20261130T101500-3fa9c2d1 build --unit 3",
    "pause": "akm-run pause 20261130T101500-3fa9c2d1 deploy",
    "unpause": "akm-run unpause 20261130T101500-3fa9c2d1 deploy",
    "verify": "akm-run verify plans/workflows/release.plan.json --allowed-signers /etc/akm/allowed_signers",
    "preflight": "akm-run preflight plans/workflows/release.plan.json --param version=1.4.0",
    "worker": "akm-run worker --database postgresql://akm@db.internal/akm --concurrency 8",
    "worktrees": "akm-run worktrees 20261130T101500-3fa9c2d1 --prune",
    "completion": "akm-run completion bash > /etc/bash_completion.d/akm-run",
    "events": "akm-run events 20261130T101500-3fa9c2d1 --children --kind 'step.*' --follow",
    "prune": "akm-run prune --older-than 30d --keep-last 5 --dry-run",
    "delete": "akm-run delete 20261130T101500-3fa9c2d1",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="akm-run", description="Execute verified akm plan files.")
    parser.add_argument("--version", action="version", version=f"akm-run {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary, description=summary, epilog=f"Example: {EXAMPLES[name]}")
        sub.add_argument("--state-dir", type=Path, help=STATE_DIR_HELP)
        sub.add_argument("--database", metavar="URL", help=DATABASE_HELP)
        return sub

    run = command("run", "Verify a plan file and run it, or drive an existing run by id.")
    plan_options(run)
    run.add_argument("--max-concurrency", type=integer, default=16, help="cap on units in flight (default 16)")
    run.add_argument("--timeout", help="abort this drive after a duration such as 30m (resumable)")
    run.add_argument("--format", choices=("text", "json"), default="text")
    run.add_argument("--detach", action="store_true", help=DETACH_HELP)
    status = command("status", "Show a run: its steps, notes and child runs (default: the latest run).")
    status.add_argument("run_id", metavar="RUN", nargs="?")
    status.add_argument("--format", choices=("text", "json"), default="text")
    listing = command("list", "List runs (child runs only with --children).")
    listing.add_argument("--children", action="store_true", help="include child runs")
    listing.add_argument("--status", choices=("active", "completed", "failed", "blocked"))
    listing.add_argument("--format", choices=("text", "json"), default="text")
    logs_options(
        command("logs", "Show what a run's units did: every attempt, its output and stderr (secrets redacted).")
    )
    events_options(command("events", "Show a run's events in commit order; --follow waits for more."))
    resume = command("resume", "Reopen a blocked or failed run: its blocked and failed steps become pending.")
    resume_options(resume)
    approve = command("approve", "Approve (or --reject) a blocked approval step.")
    approve.add_argument("run_id", metavar="RUN")
    approve.add_argument("step_id", metavar="STEP")
    approve.add_argument("--by", default=None, help="who decides (default: $USER)")
    approve.add_argument("--note", default=None, help="a note stored with the decision")
    approve.add_argument("--reject", action="store_true", help=REJECT_HELP)
    abandon = command("abandon", "Mark a run failed; it will not be driven again.")
    abandon.add_argument("run_id", metavar="RUN")
    skip, retry = operator_commands(command)
    verify = command("verify", "Verify a plan file as `run` does; exit 0 or 4.")
    verify.add_argument("plan", type=Path)
    verify.add_argument("--expect-hash", help="refuse unless the plan hash is exactly this")
    signed(verify)
    worktrees_options(command("worktrees", "List the worktrees attempts kept for review (--prune removes them)."))
    retention_options(command("prune", PRUNE), command("delete", DELETE))
    worker_options(command("worker", "Serve a shared store's worker pool: drive runs and run their units."))
    for sub in (resume, approve):
        sub.add_argument("--allowed-signers", type=Path, metavar="FILE", help=SIGNERS_HELP)
    preflight_options(command("preflight", PREFLIGHT_SUMMARY), skipped_by=(run, resume, approve, skip, retry))
    summary = "Print a shell completion script."
    completion = commands.add_parser(
        "completion", help=summary, description=summary, epilog=f"Example: {EXAMPLES['completion']}"
    )
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))
    return parser


def worktrees_options(kept: argparse.ArgumentParser) -> None:
    """`akm-run worktrees`' own options (docs/cli.md)."""
    kept.add_argument("run_id", metavar="RUN", nargs="?", help="only this run's and its child runs' worktrees")
    kept.add_argument("--prune", action="store_true", help="remove the kept worktrees that have no changes now")
    kept.add_argument("--dirty", action="store_true", help="with --prune: remove those with changes too")
    kept.add_argument("--format", choices=("text", "json"), default="text")


def operator_commands(
    command: Callable[[str, str], argparse.ArgumentParser],
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """`skip`, `retry`, `pause` and `unpause`: operator control of one step (docs/runbook.md)."""
    skip = command("skip", "Skip a pending, failed or blocked step, with the output it should have had.")
    skip.add_argument("run_id", metavar="RUN")
    skip.add_argument("step_id", metavar="STEP")
    given = skip.add_mutually_exclusive_group()
    given.add_argument("--output", metavar="JSON", help="the step's output, strict JSON (default: null)")
    given.add_argument("--output-file", type=Path, metavar="FILE", help="the step's output, read from FILE")
    skip.add_argument("--note", default=None, help="a note stored with the skip")
    retry = command("retry", "Run a step again, and every later step that reads it.")
    retry.add_argument("run_id", metavar="RUN")
    retry.add_argument("step_id", metavar="STEP")
    retry.add_argument("--unit", type=integer, metavar="N", help="only map item N (the steps that read the map rerun)")
    for sub in (skip, retry):
        sub.add_argument("--by", default=None, help="who makes the change (default: $USER)")
        sub.add_argument("--allowed-signers", type=Path, metavar="FILE", help=SIGNERS_HELP)
    pause = command("pause", "Start nothing new in a run, or in some of its steps; also under a live driver.")
    unpause = command("unpause", "Lift a pause; continue the run with `akm-run run RUN`.")
    for sub in (pause, unpause):
        sub.add_argument("run_id", metavar="RUN")
        sub.add_argument("steps", metavar="STEP", nargs="*", help="only these steps (default: the whole run)")
        sub.add_argument("--by", default=None, help="who makes the change (default: $USER)")
    pause.add_argument("--now", action="store_true", help="terminate their units in flight, as an abort does")
    for sub in (skip, retry, pause, unpause):
        sub.add_argument("--format", choices=("text", "json"), default="text")
    return skip, retry  # they submit a drive on the pool, so they preflight (--no-preflight)


def logs_options(logs: argparse.ArgumentParser) -> None:
    """`akm-run logs`'s own arguments."""
    logs.add_argument("run_id", metavar="RUN", nargs="?", help="a run id (default: the latest top-level run)")
    logs.add_argument("step", metavar="STEP", nargs="?", help="only this step's units")
    logs.add_argument("--unit", type=integer, metavar="N", help="only map item N (0 for a step's single unit)")
    logs.add_argument("--attempt", type=integer, metavar="N", help="only attempt N of each unit")
    logs.add_argument("--notifications", action="store_true", help="the run's notifications and their delivery")
    logs.add_argument("--format", choices=("text", "json"), default="text")


def resume_options(resume: argparse.ArgumentParser) -> None:
    """`akm-run resume`'s own arguments (docs/runtime.md, "Token budgets" for --extra-tokens)."""
    resume.add_argument("run_id", metavar="RUN")
    resume.add_argument("--extra-tokens", type=integer, metavar="N", help="raise the run's token allowance by N first")
    resume.add_argument("--by", default=None, help="who raises it (default: $USER)")


def events_options(events: argparse.ArgumentParser) -> None:
    """`akm-run events`'s own arguments (docs/runtime.md, "Events")."""
    events.add_argument("run_id", metavar="RUN", nargs="?", help="a run id (default: the latest top-level run)")
    events.add_argument("--children", action="store_true", help="its child runs' events too, interleaved")
    events.add_argument("--since", type=integer, default=0, metavar="SEQ", help="only events after this seq")
    kinds = "only events of kinds matching this glob (step.*, unit.failed); repeat for more"
    events.add_argument("--kind", action="append", default=[], metavar="GLOB", help=kinds)
    follow = "print events as they commit until the run settles or its drive ends; exit as `run` would"
    events.add_argument("--follow", action="store_true", help=follow)
    events.add_argument("--format", choices=("text", "json", "jsonl"), default="text")


def plan_options(sub: argparse.ArgumentParser) -> None:
    """What `run` and `preflight` take: a plan file or a run id, its params, its pins, its host."""
    sub.add_argument("target", metavar="PLAN|RUN_ID")
    sub.add_argument("--param", action="append", default=[], metavar="K=V", help="a param, parsed by its type")
    sub.add_argument("--params-file", type=Path, help="a JSON object of params (--param wins)")
    sub.add_argument("--expect-hash", help="refuse unless the plan hash is exactly this")
    signed(sub)
    sub.add_argument("--workdir", type=Path, help="the units' working directory (default: the run's, else .)")
    sub.add_argument("--agent-cmd", help="the agent command (default: the run's, else $AKM_AGENT_CMD)")
    sub.add_argument("--notify-cmd", help="run this on blocked, failed, stalled (default: $AKM_RUN_NOTIFY_CMD)")


def preflight_options(check: argparse.ArgumentParser, skipped_by: tuple[argparse.ArgumentParser, ...]) -> None:
    """`akm-run preflight`'s options (`run`'s, for what they say about the host), and the
    `--no-preflight` of the commands that preflight (docs/runtime.md, "Preflight")."""
    for sub in skipped_by:
        sub.add_argument("--no-preflight", action="store_true", help=NO_PREFLIGHT_HELP)
    plan_options(check)
    check.add_argument("--format", choices=("text", "json"), default="text")


PRUNE = "Delete settled top-level runs older than a cutoff, with all they left."
DELETE = "Delete one settled top-level run, its child runs and all they left."


def integer(text: str) -> int:
    """An integer the journal keeps exactly, as it keeps a plan's numbers: within ±(2^53 - 1)
    (argparse names this function in its error: "invalid integer value"). A larger one would
    overflow a store's integer column."""
    from akm_run.planformat import MAX_INT  # late: 4.5 ms of start-up that `--help` never needs

    value = int(text)
    if abs(value) > MAX_INT:
        raise argparse.ArgumentTypeError(str(wording.beyond_integers(value=text, limit=MAX_INT)))
    return value


def count(text: str) -> int:
    """A whole number, 0 or more (argparse names this function in its error: "invalid count value")."""
    if not (text.isascii() and text.isdigit()):
        raise ValueError(text)
    return integer(text)


def retention_options(prune: argparse.ArgumentParser, delete: argparse.ArgumentParser) -> None:
    """`akm-run prune`'s and `delete`'s own options (docs/runtime.md, "Retention")."""
    prune.add_argument("--older-than", required=True, metavar="AGE", help="last updated before this long ago: 30d, 12h")
    prune.add_argument("--status", metavar="LIST", help="of these: completed,failed,abandoned (default: all three)")
    prune.add_argument("--keep-last", type=count, default=0, metavar="N", help="keep the newest N runs of each ref")
    prune.add_argument("--ref", help="only runs of this workflow ref")
    prune.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    prune.add_argument("--vacuum", action="store_true", help="give the space back to the file system afterwards")
    prune.add_argument("--format", choices=("text", "json"), default="text")
    delete.add_argument("run_id", metavar="RUN")
    delete.add_argument("--format", choices=("text", "json"), default="text")


def worker_options(worker: argparse.ArgumentParser) -> None:
    """`akm-run worker`'s own options (docs/scale-out.md)."""
    concurrency = "units in flight per worker: one value for the whole pool (default 4)"
    worker.add_argument("--concurrency", type=integer, default=4, metavar="N", help=concurrency)
    worker.add_argument("--executor-id", metavar="ID", help="this worker's name in the pool (default: the host name)")
    takeover = "take over a worker silent this long (default 30s)"
    worker.add_argument("--takeover-after", default="30s", metavar="DUR", help=takeover)
    workdir = "where units run when a run's own workdir is not on this host (default: .)"
    worker.add_argument("--workdir", type=Path, help=workdir)
    worker.add_argument("--poll", default="1s", metavar="DUR", help="how often to look for work (default 1s)")
    grace = "on SIGTERM, how long the work in flight may take to finish (default 30s)"
    worker.add_argument("--grace", default="30s", metavar="DUR", help=grace)
    notify = "the notifier of the runs this worker drives that have none (default: $AKM_RUN_NOTIFY_CMD)"
    worker.add_argument("--notify-cmd", metavar="CMD", help=notify)


STATE_DIR_HELP = (
    "state directory (default: $AKM_STATE_DIR, else the nearest .akm-run/ holding runs up to the project root, "
    "else .akm-run/ at the project root: the nearest akm.toml, else .git; else ./.akm-run)"
)
DATABASE_HELP = (
    "a shared PostgreSQL store, postgresql://… (default: $AKM_RUN_DATABASE, else the state directory); "
    "needs akm-run[postgres]"
)
PREFLIGHT_SUMMARY = "Check this host against what a plan, or a run's steps still to run, need."
NO_PREFLIGHT_HELP = "do not check the host first (see `akm-run preflight`); a warning says so"
DETACH_HELP = "with --database: submit the run to the worker pool and print its id instead of following it"
SIGNERS_HELP = (
    "require a valid signature by a signer this file (git's allowed_signers format) allows "
    "(default: $AKM_RUN_ALLOWED_SIGNERS; unset: signatures are not required)"
)
REJECT_HELP = (
    "reject: the step fails with approval_rejected "
    "(unless it has on_error = continue, when the run goes on with approved: false)"
)


def signed(sub: argparse.ArgumentParser) -> None:
    """The signature options of the commands that read a plan file."""
    sub.add_argument("--allowed-signers", type=Path, metavar="FILE", help=SIGNERS_HELP)
    sub.add_argument("--signature", type=Path, metavar="FILE", help="the plan's signature (default: PLAN.sig)")


def completion_script(shell: str) -> str:
    """A completion script for `akm-run`, generated from the parser itself."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options = {
        name: sorted(o for a in sub._actions for o in a.option_strings if o.startswith("--"))
        for name, sub in subparsers.choices.items()
    }
    if shell == "fish":
        lines = [f'complete -c akm-run -n "__fish_use_subcommand" -f -a "{" ".join(options)}"']
        for name, flags in options.items():
            lines += [f'complete -c akm-run -n "__fish_seen_subcommand_from {name}" -l {f[2:]}' for f in flags]
        return "\n".join(lines) + "\n"
    cases = "\n".join(f'    {name}) opts="{" ".join(flags)}" ;;' for name, flags in options.items())
    script = f"""_akm_run() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" opts=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "{" ".join(options)} --help --version" -- "$cur") )
    return
  fi
  case "${{COMP_WORDS[1]}}" in
{cases}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
  else
    COMPREPLY=( $(compgen -f -- "$cur") )
  fi
}}
complete -o filenames -F _akm_run akm-run
"""
    if shell == "zsh":
        script = "autoload -U +X bashcompinit && bashcompinit\n" + script
    return script


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return exitcodes.USAGE
    # Imported only now: the commands and the engine they reach (and sqlite3) cost about 70 ms of
    # start-up, which `--help` and a usage error spend nothing on.
    import sqlite3

    from akm_run import commands, control, verbs

    if args.command == "completion":
        sys.stdout.write(completion_script(args.shell))
        return exitcodes.COMPLETED
    if (garbled := not_text(parser, args)) is not None:
        return _refuse(garbled)
    try:
        if (refused := store_refusal(args)) is not None:
            return _refuse(refused)
        code: int = {**commands.COMMANDS, **verbs.COMMANDS, **control.COMMANDS}[args.command](args)
    except BrokenPipeError:
        return exitcodes.FAILED
    except NewerSchema as error:
        return _refuse(wording.written_by_a_newer_akm_run(error=error))
    except sqlite3.DatabaseError as error:
        where = state_dir(args) / "state.db" if hasattr(args, "state_dir") else "the state database"
        return _refuse(wording.state_database_unusable(where=where, error=error))
    except Exception as error:  # noqa: BLE001 - no traceback reaches a user
        if (unreachable := unusable(select(getattr(args, "database", None)), error)) is not None:
            return _refuse(wording.database_unreachable(reason=unreachable))
        internal = wording.internal_error(kind=type(error).__name__, error=error)
        print(f"akm-run: internal error: {internal.text}", file=sys.stderr)
        return internal.exit
    return code


def _refuse(failure: Failure) -> int:
    """Say why the command cannot run, as `akm-run: error: …`, printed as it is (what it quotes from
    the command line or the environment is quoted already)."""
    print(f"akm-run: error: {failure.text}", file=sys.stderr)
    return failure.exit


READS = (
    "AKM_STATE_DIR",
    "AKM_RUN_DATABASE",
    "AKM_AGENT_CMD",
    "AKM_RUN_ALLOWED_SIGNERS",
    "AKM_RUN_RETENTION",
)  # read by akm-run itself


def not_text(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Failure | None:
    """Why an argument, or a variable akm-run reads, is unusable: it is not UTF-8 text (run ids,
    params, names, notes and paths are all stored or shown as text). None when all are."""
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = {
        a.dest: a.option_strings[0] if a.option_strings else a.metavar or a.dest
        for a in subparsers.choices[args.command]._actions
    }
    for dest, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str | Path) and not utf8(str(item)):
                return wording.argument_not_text(option=names.get(dest, dest), value=as_given(str(item)))
    for variable in READS:
        if not utf8(value := os.environ.get(variable, "")):
            return wording.variable_not_text(variable=variable, value=as_given(value))
    return None


def store_refusal(args: argparse.Namespace) -> Failure | None:
    """Why the store the arguments select cannot serve this command (None: the SQLite state directory)."""
    if not hasattr(args, "database"):
        return None
    try:
        database = select(args.database)
    except DatabaseError as error:
        return wording.bad_database_url(error=error)
    if database is None and args.command == "worker":
        return wording.worker_needs_database()
    if database is None and getattr(args, "detach", False):
        return wording.detach_needs_database()
    if database is None or args.command == "verify":  # verify reads no store
        return None
    if args.state_dir is not None:
        return wording.two_stores(database=database)
    return None
