"""A fork server for the tests' `akm-run` commands: one process per pytest process that has imported
every akm_run module once, and forks a real `python -m akm_run ARGS` process from itself for each
command, with the command's own argv, working directory, environment, standard streams and session.

A command's CPU went mostly on its start-up: an `akm-run` on the shared store imports DBOS,
SQLAlchemy and psycopg, 0.6 s of CPU or more, and a `[postgres]` variant runs several commands
and a worker (docs/performance.md, "The test suite"). A forked command starts with those imports
done; everything after (argument parsing, the store, the units it spawns, its exit) is the real
command's. `Forked` is a `subprocess.Popen` whose child the server forks instead of an exec:
pipes, `communicate`, timeouts, signals and process groups work as they do on any Popen; its exit
status comes from the server, the child's parent. `AKM_TEST_SPAWN=exec` runs every command as a
plain `python -m akm_run` subprocess instead (docs/development.md).

Run as a script, this module is the server: `python forkserver.py SOCKET PARENT_PID`."""

from __future__ import annotations

import atexit
import gc
import importlib
import inspect
import io
import json
import os
import pkgutil
import runpy
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODULE = "akm_run"
SPAWN_VARIABLE = "AKM_TEST_SPAWN"  # `exec`: plain subprocesses, no fork server
READY_WITHIN_S = 60.0
REQUEST_WITHIN_S = 10.0  # from a client's connection to the end of its request


def enabled() -> bool:
    return os.environ.get(SPAWN_VARIABLE, "fork") != "exec"


# -- the server ---------------------------------------------------------------------------------------


def _preload() -> None:
    """Import every module of the runtime (not its __main__, which runs the command)."""
    package = importlib.import_module(MODULE)
    for info in pkgutil.walk_packages(package.__path__, f"{MODULE}."):
        if not info.name.endswith(".__main__"):
            importlib.import_module(info.name)


class _Server:
    """Accepts one connection per command: a JSON line (argv, cwd, env, whether the command leads a
    session of its own) with its three standard stream fds; answers the child's pid, then its exit
    code (negative: the signal that ended it) once it is reaped."""

    def __init__(self, path: str, parent: int) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(f"{path}.new")
        self.listener.listen(64)
        os.rename(f"{path}.new", path)  # the path appears listening: a client that sees it can connect
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.parent = os.pidfd_open(parent)  # the pytest process: the server ends with it
        self.selector.register(self.parent, selectors.EVENT_READ, "parent")
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd → (pid, its command's connection)

    def serve(self) -> dict[str, Any]:
        """Serve until the parent ends (then exit); in a forked child, return its request."""
        while True:
            for key, _ in self.selector.select():
                if key.data == "parent":
                    sys.exit(0)
                if key.data == "accept":
                    request = self._accept()
                    if request is not None:
                        return request
                else:
                    self._reap(key.fd)

    def _accept(self) -> dict[str, Any] | None:
        connection, _ = self.listener.accept()
        fds: list[int] = []
        connection.settimeout(REQUEST_WITHIN_S)  # a client that connected and died wedges no one
        try:
            data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
            while not data.endswith(b"\n"):  # a large environment comes in more than one read
                if not (more := connection.recv(1 << 16)):
                    raise ValueError("the request ended early")
                data += more
            request: dict[str, Any] = json.loads(data)
            if len(fds) != 3:
                raise ValueError(f"expected three fds, got {len(fds)}")
            connection.settimeout(None)
        except (OSError, ValueError) as error:
            for fd in fds:
                os.close(fd)
            print(f"forkserver: bad request: {error}", file=sys.stderr, flush=True)
            connection.close()
            return None
        pid = os.fork()
        if pid == 0:
            self._become(connection, fds, request)
            return request
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, connection)
        self.selector.register(pidfd, selectors.EVENT_READ, "child")  # the child says its pid itself
        return None

    def _reap(self, pidfd: int) -> None:
        pid, connection = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        _send(connection, {"exit": os.waitstatus_to_exitcode(status)})
        connection.close()

    def _become(self, connection: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
        """In the forked child: drop the server's descriptors, then take the command's session,
        streams, working directory and environment."""
        self.selector.close()
        self.listener.close()
        os.close(self.parent)
        for pidfd, (_, other) in self.children.items():
            os.close(pidfd)
            other.close()
        try:
            if request["session"]:
                os.setsid()
            os.chdir(request["cwd"])
        except OSError as error:  # Popen raises it in the parent, as here the client does
            _send(connection, {"errno": error.errno, "error": str(error)})
            os._exit(255)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        _streams(unbuffered=bool(os.environ.get("PYTHONUNBUFFERED")))
        # Started, as Popen returns once its child has exec'd: its session and directory are set.
        _send(connection, {"pid": os.getpid()})
        connection.close()


_replaced: list[Any] = []  # the server's own standard streams, kept open: their fds are the child's now


def _streams(unbuffered: bool) -> None:
    """Standard streams as a fresh interpreter makes them on fds 0, 1 and 2 (POSIX): stdout
    line-buffered on a terminal, stderr always, both written through under PYTHONUNBUFFERED."""
    encoding, errors = sys.stdout.encoding, sys.stdout.errors
    _replaced.extend((sys.stdin, sys.stdout, sys.stderr))

    def writer(fd: int, errors: str, line_buffering: bool) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "w", closefd=False)
        buffer: Any = raw if unbuffered else io.BufferedWriter(raw)
        return io.TextIOWrapper(
            buffer, encoding, errors, newline="\n", line_buffering=line_buffering, write_through=unbuffered
        )

    reader = io.BufferedReader(io.FileIO(0, "r", closefd=False))
    streams = {
        "stdin": io.TextIOWrapper(reader, encoding, errors, newline="\n"),
        "stdout": writer(1, errors or "strict", line_buffering=os.isatty(1)),
        "stderr": writer(2, "backslashreplace", line_buffering=True),
    }
    for name, stream in streams.items():
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _send(connection: socket.socket, message: dict[str, Any]) -> None:
    try:
        connection.sendall(json.dumps(message).encode() + b"\n")
    except OSError:  # the test no longer waits for it
        pass


def _serve(path: str, parent: int) -> None:
    _preload()
    gc.freeze()  # what the server imported is never collected: a child's collections leave its pages shared
    request = _Server(path, parent).serve()
    # The forked command, from here on as `python -m akm_run ARGV` run in its working directory.
    sys.argv = ["-m", *request["argv"]]  # run_module puts the module's path first, as -m does
    sys.path[0] = os.getcwd()
    runpy.run_module(MODULE, run_name="__main__", alter_sys=True)


# -- the client ---------------------------------------------------------------------------------------


class _Client:
    """This process's fork server, started at first use and stopped as this process ends."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="akm-fork-")
        self.path = os.path.join(self.directory, "socket")
        self.log = open(os.path.join(self.directory, "server.log"), "w+b")
        environ = {k: v for k, v in os.environ.items() if not k.startswith("AKM_")}
        self.process = subprocess.Popen(
            [sys.executable, __file__, self.path, str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            env=environ,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + READY_WITHIN_S
        while not os.path.exists(self.path):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise RuntimeError(f"the fork server did not start: {self.log.read().decode(errors='replace')}")
            time.sleep(0.02)

    def connect(self, request: dict[str, Any], fds: list[int]) -> tuple[_Replies, int]:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self.path)
        data = json.dumps(request).encode() + b"\n"
        sent = socket.send_fds(connection, [data], fds)
        connection.sendall(data[sent:])
        replies = _Replies(connection)
        message = replies.next(None)
        if message is not None and "errno" in message:
            replies.next(None)  # its exit
            connection.close()
            raise OSError(message["errno"], message["error"])
        if message is None or "pid" not in message:
            raise RuntimeError("the fork server did not start the command")
        return replies, int(message["pid"])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        self.log.close()
        for name in ("socket", "socket.new", "server.log"):
            Path(self.directory, name).unlink(missing_ok=True)
        os.rmdir(self.directory)


def children_cpu() -> float:
    """The CPU seconds of the commands this process's fork server has reaped so far (0 before it
    started): theirs count in no rusage of this process until the server itself ends."""
    if _client is None:
        return 0.0
    try:
        fields = Path(f"/proc/{_client.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[13:15]) / os.sysconf("SC_CLK_TCK")  # cutime cstime


_client: _Client | None = None
_client_lock = threading.Lock()


def _server() -> _Client:
    global _client
    with _client_lock:
        if _client is None:
            _client = _Client()
        return _client


class _Replies:
    """The server's JSON lines on one connection."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection, self.pending = connection, b""

    def next(self, timeout: float | None) -> dict[str, Any] | None:
        """The next message; None when the connection ended; TimeoutError after `timeout`."""
        while b"\n" not in self.pending:
            self.connection.settimeout(timeout)
            try:
                chunk = self.connection.recv(4096)
            except (TimeoutError, BlockingIOError):  # BlockingIOError: a timeout of 0
                raise TimeoutError from None
            if not chunk:
                return None
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message


def _given(fd: int, standard: int) -> int:
    """The fd a child's standard stream `standard` is to be: `fd`, else (-1: inherited) a duplicate of
    this process's own, or of /dev/null where this process has none."""
    if fd != -1:
        return fd
    try:
        return os.dup(standard)
    except OSError:
        return os.open(os.devnull, os.O_RDWR)


_CHILD = inspect.signature(subprocess.Popen._execute_child)  # type: ignore[attr-defined]
_PIPES = ("p2cread", "p2cwrite", "c2pread", "c2pwrite", "errread", "errwrite")


class Forked(subprocess.Popen[str]):
    """`subprocess.Popen([sys.executable, "-m", "akm_run", *ARGS], …)` whose child the fork server
    forks; any other command line is started as Popen starts it."""

    _replies: _Replies | None = None

    def _execute_child(self, *given: Any) -> None:
        """Popen's last step, its parameters named as Popen names them (`_CHILD`)."""
        child = _CHILD.bind(self, *given).arguments
        argv = list(map(str, child["args"]))
        if argv[:3] != [sys.executable, "-m", MODULE] or child["shell"] or child["preexec_fn"] or child["pass_fds"]:
            return super()._execute_child(*given)  # type: ignore[misc, no-any-return]
        p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite = (child[name] for name in _PIPES)
        fds = [_given(p2cread, 0), _given(c2pwrite, 1), _given(errwrite, 2)]
        request = {
            "argv": argv[3:],
            "cwd": os.fspath(child["cwd"]) if child["cwd"] is not None else os.getcwd(),
            "env": dict(os.environ if child["env"] is None else child["env"]),
            "session": bool(child["start_new_session"]),
        }
        try:
            self._replies, self.pid = _server().connect(request, fds)
        finally:
            for fd in set(fds) - {p2cread, c2pwrite, errwrite}:  # this process's own, stood in
                os.close(fd)
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]

    def _ended(self, timeout: float | None) -> bool:
        """Whether the child has ended (its return code set), waiting at most `timeout`."""
        if self.returncode is not None:
            return True
        assert self._replies is not None
        message = self._replies.next(timeout)
        self._replies.connection.close()
        if message is None:
            raise RuntimeError(f"the fork server lost the command {self.args!r}")
        self.returncode = int(message["exit"])
        return True

    def _internal_poll(self, _deadstate: Any = None, **_: Any) -> int | None:
        if self._replies is None:
            return super()._internal_poll(_deadstate)  # type: ignore[misc, no-any-return]
        if self.returncode is None and self._waitpid_lock.acquire(False):  # type: ignore[attr-defined]
            try:
                self._ended(0)
            except TimeoutError:
                pass
            finally:
                self._waitpid_lock.release()  # type: ignore[attr-defined]
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        if self._replies is None:
            return super()._wait(timeout)  # type: ignore[misc, no-any-return]
        with self._waitpid_lock:  # type: ignore[attr-defined]
            try:
                self._ended(timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
        assert self.returncode is not None
        return self.returncode


def run(
    args: Sequence[str | os.PathLike[str]], *, input: str | None = None, timeout: float | None = None, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(args, capture_output=True, text=True, …)` with the command forked when it is
    akm_run's (and the fork server is enabled)."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with popen(args, text=True, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def popen(args: Sequence[str | os.PathLike[str]], **kwargs: Any) -> subprocess.Popen[str]:
    return (Forked if enabled() else subprocess.Popen)(args, **kwargs)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
