"""W708: a `shell` command that runs a workspace file, which the plan does not freeze.

A `script` target's bytes are frozen into the plan and hashed in its read set; a shell command line
is frozen only as text, so the file it runs can change after review with no change to the plan. A
command line can name files in ways no checker can see, so this looks only where the command is
plain: its first word after `VAR=value` assignments (and `exec`), or the first non-option argument
of a well-known interpreter, when that word is a relative path to a regular file in the workspace."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from akmc import messages

if TYPE_CHECKING:
    from akmc.diagnostics import Report
    from akmc.load import ReadSet
    from akmc.resolve import Model

INTERPRETERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "python", "python3", "node", "ruby", "perl", "pwsh"})
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# A command line without quotes, escapes or comments: `shlex.split` (POSIX mode, whole words) only
# splits it at its whitespace, which these two patterns do without shlex's character-by-character lexer.
PLAIN = re.compile(r"[^'\"\\#]*")
BLANKS = re.compile(r"[ \t\r\n]+")


def check_shells(model: Model, root: Path, report: Report, reads: ReadSet) -> None:
    """W708 on each shell command (step targets, `map` targets, gate checks, the `notify` section's
    notifier) that runs a workspace file; every path looked at is recorded in `reads` as probed, so a
    cached result sees it appear."""
    notifier = model.notify.target if model.notify is not None else None
    looked: dict[str, str | None] = {}  # each word looked at, once: steps often run the same file
    for target in [*(t for sm in model.steps for t in (sm.target, sm.gate_check)), notifier]:
        if target is None or target.kind != "shell" or target.text is None or target.text.kind == "file":
            continue
        path = _run_file(target.text.value, root, reads, looked)
        if path is not None:
            report.add(messages.shell_runs_workspace_file(path=path), target.text.span)


def _run_file(command: str, root: Path, reads: ReadSet, looked: dict[str, str | None]) -> str | None:
    """The workspace file `command` runs (root-relative), or None."""
    words = split(command)
    if words is None:
        return None  # unbalanced quotes: the shell will say so
    while words and (ASSIGNMENT.match(words[0]) or words[0] == "exec"):
        words = words[1:]
    if not words:
        return None
    candidate = words[0]
    if os.path.basename(candidate) in INTERPRETERS:
        arguments = [w for w in words[1:] if not w.startswith("-")]
        if not arguments or words[1:2] == ["-c"]:
            return None
        candidate = arguments[0]
    elif "/" not in candidate:
        return None  # a command looked up on PATH
    if candidate not in looked:
        looked[candidate] = _workspace_file(candidate, root, reads)
    return looked[candidate]


def split(command: str) -> list[str] | None:
    """The words of a command line as `shlex.split(command, comments=True)` gives them; None when
    its quotes do not balance."""
    if PLAIN.fullmatch(command):
        return [w for w in BLANKS.split(command) if w]
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return None


def _workspace_file(word: str, root: Path, reads: ReadSet) -> str | None:
    pure = PurePosixPath(word)
    if pure.is_absolute() or ".." in pure.parts or "\\" in word or not pure.parts:
        return None
    normal = pure.as_posix()
    try:
        resolved = (root / pure).resolve()
        resolved.relative_to(root.resolve())
        is_file = resolved.is_file()
        data = resolved.read_bytes() if is_file else None  # a regular file: never a FIFO's blocking read
    except (OSError, ValueError, RuntimeError):
        return None
    reads.probe(normal, data if is_file else None)
    return normal if is_file else None
