"""`akmc fmt`: print `.akm` sources in the one canonical layout, in place, or check that they are."""

from __future__ import annotations

import difflib
import os
import stat
import sys
from pathlib import Path

from akm_run.atomic import write_atomically
from akmc import exitcodes
from akmc.formatter import SyntaxProblem, format_source
from akmc.render.text import render_one
from akmc.sources import MAX_SOURCE_BYTES, SourceError, decode_source
from akmc.workspace import discover, display_path, read_bytes


def run(paths: list[Path], *, check: bool = False, diff: bool = False) -> int:
    """Format files and directories (recursively), or stdin for `-`. Files are rewritten only when
    they change and neither `check` nor `diff` is given. Exit 0 when everything is (or now is)
    formatted, 1 when `check`/`diff` found files that would change, 2 when a file could not be read
    or does not parse (that file is left untouched; the others are still formatted)."""
    if [str(p) for p in paths] == ["-"]:
        return _stdin(check=check, diff=diff)
    if any(str(p) == "-" for p in paths):
        print("akmc: error: `-` (stdin) cannot be combined with paths", file=sys.stderr)
        return exitcodes.USAGE
    named = paths or [Path(".")]
    missing = [p for p in named if not p.exists() and not p.is_symlink()]
    if missing:
        print(f"akmc: error: {display_path(missing[0])} does not exist", file=sys.stderr)
        return exitcodes.USAGE
    files = discover(named)
    if not files:
        print(f"akmc: error: no .akm files in {', '.join(display_path(p) for p in named)}", file=sys.stderr)
        return exitcodes.USAGE
    failed = changed = 0
    for path in files:
        name = display_path(path)
        try:
            text = _read(path, name)
            formatted = format_source(text, name).text
        except SourceError as error:
            print(f"akmc: error: {error}", file=sys.stderr)
            failed += 1
            continue
        except SyntaxProblem as problem:
            _refuse(problem, text)
            failed += 1
            continue
        if formatted == text:
            continue
        changed += 1
        if diff:
            sys.stdout.writelines(_diff(text, formatted, name))
        elif check:
            print(f"would reformat {name}")
        else:
            try:
                _write(path, formatted)
            except OSError as error:
                print(f"akmc: error: cannot write {name}: {error.strerror or error}", file=sys.stderr)
                failed += 1
                changed -= 1
                continue
    verb = "would be reformatted" if check or diff else "reformatted"
    print(
        f"{changed} file{'s' if changed != 1 else ''} {verb}, {len(files) - changed - failed} left unchanged"
        + (f", {failed} not formatted (errors above)" if failed else ""),
        file=sys.stderr,
    )
    if failed:
        return exitcodes.USAGE
    return exitcodes.FINDINGS if changed and (check or diff) else exitcodes.OK


def _stdin(*, check: bool, diff: bool) -> int:
    text = decode_source(sys.stdin.buffer.read(MAX_SOURCE_BYTES + 1))
    if not isinstance(text, str):
        print(f"akmc: error: <stdin>: {text.text}", file=sys.stderr)
        return exitcodes.USAGE
    try:
        formatted = format_source(text).text
    except SyntaxProblem as syntax_problem:
        _refuse(syntax_problem, text)
        return exitcodes.USAGE
    if diff:
        sys.stdout.writelines(_diff(text, formatted, "<stdin>"))
    elif not check:
        sys.stdout.write(formatted)
    return exitcodes.FINDINGS if (check or diff) and formatted != text else exitcodes.OK


def _read(path: Path, name: str) -> str:
    text = decode_source(read_bytes(path, MAX_SOURCE_BYTES, name))
    if not isinstance(text, str):
        raise SourceError(f"{name}: {text.text}")
    return text


def _refuse(problem: SyntaxProblem, text: str) -> None:
    print(render_one(problem.diagnostic, text), file=sys.stderr)
    print(f"akmc: error: {problem.diagnostic.file} not formatted: it has a syntax error", file=sys.stderr)


def _diff(old: str, new: str, name: str) -> list[str]:
    return list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), name, name))


def _write(path: Path, text: str) -> None:
    """Replace the file atomically, keeping its permissions; a symlink keeps pointing at the file it
    names, which is the one rewritten."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(os.stat(target).st_mode)
    write_atomically(target, text, mode=mode)
    os.chmod(target, mode)  # the umask may have narrowed it
