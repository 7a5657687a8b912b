"""Which files `akmc check` covers: the sources the named paths hold, and those the `[check]`
configuration includes."""

from __future__ import annotations

import sys
from pathlib import Path

from akmc.config import CheckConfig
from akmc.workspace import discover, display_path


def sources(named: list[Path]) -> tuple[list[Path], bool]:
    """The sources the named paths hold, and False after an error for a path that does not exist or a
    directory without a single `.akm` file (checking nothing is never "No problems found")."""
    found: dict[Path, None] = {}
    ok = True
    for path in named:
        try:
            path.stat()
        except (FileNotFoundError, NotADirectoryError):
            if path.is_symlink():
                print(
                    f"akmc: error: cannot read {display_path(path)}: its symlink target does not exist", file=sys.stderr
                )
            else:
                print(f"akmc: error: {display_path(path)}: no such file or directory", file=sys.stderr)
            ok = False
            continue
        except OSError as error:
            print(f"akmc: error: cannot read {display_path(path)}: {error.strerror or error}", file=sys.stderr)
            ok = False
            continue
        files = discover([path])
        if not files:
            where = "the current directory" if str(path) == "." else display_path(path)
            print(
                f"akmc: error: no .akm files in {where} or below it; name a workflow or its directory", file=sys.stderr
            )
            ok = False
        found.update(dict.fromkeys(files))
    return list(found), ok


def selected(root: Path, files: list[Path], named: list[Path], config: CheckConfig) -> list[Path]:
    chosen = []
    for path in files:
        if wanted(root, path, config):
            chosen.append(path)
        elif any(path == p for p in named):
            print(f"akmc: note: {display_path(path)} is excluded by the [check] configuration", file=sys.stderr)
    return chosen


def wanted(root: Path, path: Path, config: CheckConfig) -> bool:
    if not config.include and not config.exclude:
        return True
    try:
        relative = path.resolve().relative_to(root).as_posix()
    except ValueError:
        return True
    return config.checks(relative)
