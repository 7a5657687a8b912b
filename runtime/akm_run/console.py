"""What every `akm-run` command shares with the terminal: the state directory, output, signals."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from akm_run import wording
from akm_run.database_url import select
from akm_run.stateroot import STATE_DIR_NAME, default_state_dir
from akm_run.wording import Failure


def state_dir(args: argparse.Namespace) -> Path:
    """The state directory: --state-dir, else $AKM_STATE_DIR, else the one found from the current
    directory (akm_run.stateroot)."""
    if args.state_dir is not None:
        return Path(args.state_dir)
    return default_state_dir()


def say_where(args: argparse.Namespace) -> None:
    """For `status` and `list`: `state: DIR` on stderr when no store was named (no --state-dir,
    $AKM_STATE_DIR or database) and the state directory found is not the current directory's own."""
    if args.state_dir is not None or os.environ.get("AKM_STATE_DIR") or select(args.database) is not None:
        return
    directory = default_state_dir()  # absolute, but where no current directory was left to walk up from
    if directory.is_absolute() and directory != Path.cwd() / STATE_DIR_NAME:
        print(escaped(wording.state_found(directory=directory)), file=sys.stderr)


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# What json.dumps leaves raw with ensure_ascii=False (it escapes only \x00-\x1f): DEL and the C1
# controls, one of which (\x9b) starts an escape sequence on terminals that read 8-bit controls.
C1 = re.compile(r"[\x7f-\x9f]")


def escaped(text: str, keep: str = "") -> str:
    """`text` with its control characters written out (`\\x1b`), but those in `keep`: what a unit
    printed or a journal row holds never drives the terminal it is shown on (escape sequences clear
    it, retitle it, write to its clipboard)."""
    return CONTROL.sub(lambda m: m.group() if m.group() in keep else f"\\x{ord(m.group()):02x}", text)


def fail(failure: Failure) -> int:
    """Say what went wrong on stderr, as one `akm-run:` message (control characters escaped), and
    return the exit code to end with."""
    print(f"akm-run: {escaped(failure.text, keep=chr(10))}", file=sys.stderr)
    return failure.exit


def utf8(text: str) -> bool:
    """Whether `text` is UTF-8 text (not bytes that did not decode, held as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_given(text: str) -> str:
    """`text` as its bytes were given (undecodable ones as \\xNN), quoted, at most 80 of them."""
    try:
        data = os.fsencode(text)
    except UnicodeEncodeError:  # a lone surrogate that no byte decodes to
        data = text.encode("utf-8", "backslashreplace")
    return repr(data[:80])[1:] + ("…" if len(data) > 80 else "")


def emit(document: dict[str, Any], text: str, fmt: str) -> None:
    if fmt == "json":
        text = json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2, allow_nan=False)
        sys.stdout.write(C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")
    else:
        sys.stdout.write(escaped(text, keep="\n\t"))
    sys.stdout.flush()


def on_signals(handler: Any) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)


def iso(seconds: float) -> str:
    """A time as every document prints it: UTC, ISO 8601, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
