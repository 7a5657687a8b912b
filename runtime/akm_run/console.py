"""What every `akm-run` command shares with the terminal: the state directory, output, signals."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any


def state_dir(args: argparse.Namespace) -> Path:
    if args.state_dir is not None:
        return Path(args.state_dir)
    return Path(os.environ.get("AKM_STATE_DIR") or ".akm-run")


def emit(document: dict[str, Any], text: str, fmt: str) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(text)
    sys.stdout.flush()


def on_signals(handler: Any) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)
