"""Atomic file writes: a reader sees the old file or the new one, never a part of either."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomically(target: Path, data: bytes | str, *, mode: int = 0o666) -> None:
    """Write `data` (text as UTF-8) to `target` through a temporary file beside it, then rename it
    into place. The temporary name is unique, so two writers of one target never share it (the last
    rename wins, whole); it is created like any new file (`mode` masked by the umask) and removed
    when the write fails. Raises OSError."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    # At most 200 bytes of the target's name, so the temporary's stays within NAME_MAX (255).
    stem = os.fsencode(target.name)[:200].decode("utf-8", "ignore")
    while True:
        temporary = target.with_name(f".{stem}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
