"""The unit process contract (runtime.md, "Units"): environment, context, spawn, result rules
(the process watched and stopped as akm_run.processes does it).

One function, `execute`, runs one attempt of a shell, script or agent target and returns an
`End`; it never raises for anything a unit does. Secret values are redacted from every
outcome before it is stored."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from akm_run import activity, durations, outcomes, processes, wording
from akm_run.activity import Board, Channel, Watch
from akm_run.budgets import UsageReader
from akm_run.core import End
from akm_run.locks import pid_alive
from akm_run.outcomes import STDERR_TAIL_BYTES
from akm_run.processes import KILL_GRACE_SECONDS as KILL_GRACE_SECONDS
from akm_run.processes import Streams
from akm_run.processes import stop_group as stop_group
from akm_run.processes import stop_groups as stop_groups
from akm_run.processes import stop_leftover as stop_leftover
from akm_run.processes import stop_leftovers as stop_leftovers

BASE_ENV = ("PATH", "HOME", "LANG", "TMPDIR")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# Held while a unit's or a notifier's script is written and while their processes are spawned: a
# process forked while another thread still has a script open for writing holds it open until it
# execs, and executing that script in the meantime fails with ETXTBSY ("Text file busy").
SPAWNING = threading.Lock()


class UnitFailure(Exception):
    """A unit that fails before its process starts (secret_missing, agent_unavailable)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(slots=True)
class Unit:
    """One attempt to run: what the engine resolved, ready for a process."""

    target: dict[str, Any]
    context: dict[str, Any]
    env: list[dict[str, Any]] = field(default_factory=list)
    output_schema: dict[str, Any] | None = None
    timeout_ms: int | None = None
    workdir: Path = Path(".")
    agent_cmd: str | None = None
    max_tokens: int | None = None  # AKM_MAX_TOKENS: an attempt reporting more is ended (budget_exceeded)
    stall_after_ms: int | None = None
    on_stall: str | None = None  # "terminate", else the stall only warns
    isolated: dict[str, str] = field(default_factory=dict)  # AKM_WORKTREE, AKM_BASE_COMMIT of a worktree


def environment(unit: Unit, environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The unit's environment and the secret values to redact; raises UnitFailure(secret_missing)."""
    env = {name: environ[name] for name in BASE_ENV if name in environ}
    env.setdefault("PATH", DEFAULT_PATH)
    secrets = []
    for entry in unit.env:
        name = entry["name"]
        if entry["kind"] == "literal":
            env[name] = entry["value"]
        elif entry["kind"] == "passthrough":
            if name in environ:
                env[name] = environ[name]
        else:
            variable = entry["secret"]
            if variable not in environ:
                raise UnitFailure(
                    "secret_missing",
                    f"env {name} needs secret {variable}, but the runtime's environment has no variable {variable}",
                )
            env[name] = environ[variable]
            secrets.append(environ[variable])
    context = unit.context
    env.update(
        {
            "AKM_RUN_ID": context["runId"],
            "AKM_STEP_ID": context["stepId"],
            "AKM_UNIT_ID": context["unitId"],
            "AKM_DISPATCH_ID": context["dispatchId"],
            "AKM_ATTEMPT": str(context["attempt"]),
            **unit.isolated,
        }
    )
    return env, secrets


def scratch_directory(state_dir: Path, run_id: str) -> Path:
    """A private (0700) directory for the unit files of one drive: `<state-dir>/scratch/<run>.<pid>`.
    Directories that drivers of this run left behind when they died (same host) are removed first:
    their context files may hold params a unit was given."""
    base = state_dir.absolute() / "scratch"  # a unit's cwd is the workdir: its paths must not be relative
    if base.is_symlink() or (base.exists() and not base.is_dir()):
        _remove(base)  # what a unit put in its place (a link is removed, never followed)
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    for stale in base.glob(f"{run_id}.*"):
        pid = stale.name.rsplit(".", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            _remove(stale)
    directory = base / f"{run_id}.{os.getpid()}"
    _remove(directory)
    directory.mkdir(mode=0o700)
    return directory


class Scratch:
    """The private directory of one engine's drives for their units' files: made by the outermost
    drive (`scratch_directory`, named for its run) and shared by the child runs it drives
    inline, whose units' files are named apart by dispatch id; removed when that drive ends."""

    def __init__(self) -> None:
        self._path: Path | None = None
        self._drives = 0
        self._lock = threading.Lock()  # the child runs of a map are driven on several threads

    def enter(self, state_dir: Path, run_id: str) -> Path:
        with self._lock:
            if self._path is None:
                self._path = scratch_directory(state_dir, run_id)
            self._drives += 1
            return self._path

    def leave(self) -> None:
        with self._lock:
            self._drives -= 1
            if self._drives == 0 and self._path is not None:
                shutil.rmtree(self._path, ignore_errors=True)
                self._path = None


def there(directory: Path) -> Path:
    """The drive's scratch directory, made again (private, 0700) if a unit removed it or put a file or
    a link in its place: a unit runs as the same user, and one unit's mischief must not fail the
    attempts after it (the child runs a drive drives share its directory). Never followed through a
    link. The directories above it are the state directory's: one a unit removed or replaced is not
    made again here, and the attempt's first write fails the drive (exit 70, resumable: the next
    drive makes them again, `scratch_directory`)."""
    for _ in range(3):  # a sibling attempt may be making it again at the same moment
        try:
            if stat.S_ISDIR(os.lstat(directory).st_mode):
                return directory
            _remove(directory)
        except FileNotFoundError:
            pass
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue
        except OSError:
            break
    return directory  # still not a directory: the attempt's first write says why


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def execute(
    unit: Unit,
    abort: threading.Event,
    on_spawn: Callable[[int], None] = lambda pid: None,
    environ: Mapping[str, str] | None = None,
    scratch: Path | None = None,
    board: Board | None = None,
) -> End:
    """Run one attempt of a shell, script or agent target to its outcome. Its context, script and
    progress files live in `scratch` (private, 0700) and are removed afterwards; stdout and stderr
    are pipes. `board` journals the attempt's activity while it runs (none: it is not journaled)."""
    environ = os.environ if environ is None else environ
    try:
        env, secrets = environment(unit, environ)
        argv, stdin_text = _command(unit, environ)
    except UnitFailure as failure:
        return End("failed", reason=failure.reason, message=failure.message)
    if scratch is None:
        with tempfile.TemporaryDirectory(prefix="akm-unit-") as directory:
            return execute(unit, abort, on_spawn, environ, Path(directory), board)
    scratch = there(scratch.absolute())
    prefix = scratch / f"{unit.context['dispatchId']}.{unit.context['attempt']}.{threading.get_ident()}"
    created: list[Path] = []
    watch: Watch | None = None
    reader: UsageReader | None = None

    def write(name: str, text: str, mode: int) -> Path:
        path = Path(f"{prefix}.{name}")
        created.append(path)
        write_private(path, text, mode)
        return path

    try:
        stdin_path = write("context.json", json.dumps(unit.context, ensure_ascii=False, sort_keys=True), 0o600)
        env["AKM_CONTEXT"] = str(stdin_path)
        if unit.max_tokens is not None:
            env["AKM_MAX_TOKENS"] = str(max(unit.max_tokens, 0))
        if argv[0] == "<script>":
            argv = [str(write("script", unit.target["text"], 0o700))]
        if stdin_text is not None:
            stdin_path = write("stdin", stdin_text, 0o600)
        created.append(Path(f"{prefix}.progress"))
        watch = Watch(unit.context, Channel(created[-1]), unit.stall_after_ms)  # creates the file (D6)
        env["AKM_PROGRESS"] = str(created[-1])
        if unit.target["kind"] == "agent":  # only agent units are metered (D8)
            reader = UsageReader(created[-1])  # the usage lines of the same channel
        outcome = _run(argv, unit, env, stdin_path, abort, on_spawn, secrets, (watch, board), reader)
        usage = None if reader is None else reader.finish()
    finally:
        if reader is not None:
            reader.close()
        if watch is not None:
            _last_beat(watch, board)
        for path in created:
            with contextlib.suppress(OSError):  # a unit may have removed or replaced its files
                path.unlink(missing_ok=True)
    ended = outcomes.storable(outcomes.redacted(outcome, secrets))
    ended.usage = None if usage is None else outcomes.redact(usage.fields, secrets)
    return ended


def _last_beat(watch: Watch, board: Board | None) -> None:
    """The attempt's last frame and ignored lines, journaled before its end is."""
    if board is not None:
        board.remove(watch)
        beat = watch.last_beat()
        if beat is not None:
            with contextlib.suppress(Exception):  # activity is never worth failing an attempt for
                board.journal([beat])
    watch.close()


def write_private(path: Path, text: str, mode: int) -> None:
    """Create `path` (it must not exist) with `mode` and write `text`: an executable one under
    SPAWNING, so no process forked meanwhile holds it open for writing."""
    with SPAWNING if mode & 0o111 else contextlib.nullcontext():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)


def _command(unit: Unit, environ: Mapping[str, str]) -> tuple[list[str], str | None]:
    target = unit.target
    kind = target["kind"]
    if kind == "shell":
        return ["/bin/sh", "-c", target["command"]], None
    if kind == "script":
        return ["<script>"], None
    if kind == "agent":
        command = unit.agent_cmd or environ.get("AKM_AGENT_CMD")
        if not command:
            raise UnitFailure(
                "agent_unavailable", "no agent command is configured: pass --agent-cmd or set AKM_AGENT_CMD"
            )
        return ["/bin/sh", "-c", command], target["instructions"]
    raise UnitFailure("spawn_error", f"a {kind} target has no process")


# The first words of every unit's shell: it waits on its stdin for the runtime's go-ahead, which
# comes once `on_spawn` has registered its process group (the worker's guard, the journaled pid), and
# then reads its stdin from its file. A unit that starts runs with its group known; one whose
# driver dies before that ends without running anything.
GATE = 'IFS= read -r akm_gate && [ "$akm_gate" = go ] || exit 125; unset akm_gate; exec <{stdin};'


def _gated(argv: list[str], stdin_path: Path) -> list[str]:
    """The command line that runs `argv` behind the gate: in the same shell for a shell command line
    (no extra process), through one that execs it otherwise (a script)."""
    gate = GATE.format(stdin=shlex.quote(str(stdin_path)))
    if argv[:2] == ["/bin/sh", "-c"]:
        return ["/bin/sh", "-c", f"{gate} {argv[2]}"]
    return ["/bin/sh", "-c", f'{gate} exec "$0" "$@"', *argv]


def _let_go(process: subprocess.Popen[bytes], go: int, on_spawn: Callable[[int], None]) -> None:
    """Register the process (`on_spawn`), then open its gate; if registering fails, the process ends
    at its gate without running anything and the failure goes on."""
    try:
        on_spawn(process.pid)
        with contextlib.suppress(BrokenPipeError):  # stopped meanwhile: its end is collected as any
            os.write(go, b"go\n")
    except BaseException:
        os.close(go)
        process.wait()
        raise
    os.close(go)


def _run(
    argv: list[str],
    unit: Unit,
    env: dict[str, str],
    stdin_path: Path,
    abort: threading.Event,
    on_spawn: Callable[[int], None],
    secrets: list[str],
    watched: tuple[Watch, Board | None],
    reader: UsageReader | None,
) -> End:
    processes.adopt_orphans()
    watch, board = watched
    gate, go = os.pipe()
    try:
        with SPAWNING:
            process = subprocess.Popen(
                _gated(argv, stdin_path),
                cwd=unit.workdir,
                env=env,
                stdin=gate,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
    except OSError as error:
        os.close(go)
        return End("failed", reason="spawn_error", message=f"cannot start {_what(unit)}: {error.strerror or error}")
    finally:
        os.close(gate)
    _let_go(process, go, on_spawn)
    deadline = None if unit.timeout_ms is None else time.monotonic() + unit.timeout_ms / 1000
    streams = Streams(process, STDERR_TAIL_BYTES + max((len(s.encode()) for s in secrets), default=0), watch)
    if board is not None:
        board.add(watch)
    ended = stopped = None
    try:
        while not streams.collect(processes.slice_until(deadline)):
            if board is not None:
                board.tick()
            if abort.is_set():
                ended = "aborted"
            elif deadline is not None and time.monotonic() >= deadline:
                ended = "timeout"
            elif _past_budget(unit, reader):
                ended = "budget_exceeded"
            elif unit.on_stall == "terminate" and activity.stalled(watch, board):
                ended = "stalled"
            if ended:
                stopped = processes.halt(process, streams)
                break
    finally:
        streams.close()
    return _ended(streams, unit, ended, stopped, secrets, reader)


def _past_budget(unit: Unit, reader: UsageReader | None) -> bool:
    """Whether the attempt has reported more tokens than the budget it was given (an agent only)."""
    if unit.max_tokens is None or reader is None:
        return False
    usage = reader.look()
    return usage is not None and usage.tokens > unit.max_tokens


def _ended(
    streams: Streams, unit: Unit, ended: str | None, stopped: str | None, secrets: list[str], reader: UsageReader | None
) -> End:
    """The End of an attempt whose process exited (or was stopped: `ended` says why, `stopped` how)."""
    clean = functools.partial(outcomes.clean, secrets=secrets)  # redacted before anything is cut
    what = _what(unit)
    tail = outcomes.last(clean(bytes(streams.stderr)), STDERR_TAIL_BYTES) or None
    if ended == "aborted":
        return End("aborted", reason="aborted", message=f"the drive was aborted; {stopped}", stderr_tail=tail)
    if ended == "budget_exceeded":
        assert unit.max_tokens is not None and reader is not None and reader.last is not None and stopped
        return End(
            "failed",
            reason="budget_exceeded",
            message=wording.attempt_over_budget(
                what=what, tokens=reader.last.tokens, left=unit.max_tokens, stopped=stopped
            ),
            stderr_tail=tail,
        )
    if ended == "stalled":
        assert unit.stall_after_ms is not None
        return End(
            "failed",
            reason="stalled",
            message=wording.stalled_attempt(
                what=what, stall=durations.format_ms(unit.stall_after_ms), stopped=str(stopped)
            ),
            stderr_tail=tail,
        )
    if ended == "timeout":
        assert unit.timeout_ms is not None
        return End(
            "failed",
            reason="timeout",
            message=f"{what} exceeded its timeout of {unit.timeout_ms} ms; {stopped}",
            stderr_tail=tail,
        )
    code = streams.process.returncode
    if code != 0:
        last = (tail or "").strip().splitlines()[-1:] or [""]
        status = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        message = f"{what} failed with {status}" + (f": {last[0][:200]}" if last[0] else "")
        # stdout of a failed unit is kept as text: a gate check's stdout is the feedback of its loop
        text = outcomes.first(clean(bytes(streams.stdout)), STDERR_TAIL_BYTES)
        return End(
            "failed",
            output=text[:-1] if text.endswith("\n") else text,
            reason="exit",
            message=message,
            exit_code=code,
            stderr_tail=tail,
        )
    return outcomes.read(bytes(streams.stdout), streams.stdout_size, what, unit.output_schema, tail, clean)


def _what(unit: Unit) -> str:
    kind = unit.target["kind"]
    if kind == "script":
        return f"script {unit.target['path']}"
    return "agent command" if kind == "agent" else "command"
