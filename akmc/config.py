"""`akm.toml` at the workspace root: the `[check]` table, validated key by key with line numbers.

The command line wins over the file: each option given replaces the file's value."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from akmc.diagnostics import CATALOG, did_you_mean

FILE_NAME = "akm.toml"
_KEYS = {
    "strict": "a boolean",
    "select": "a list of codes",
    "ignore": "a list of codes",
    "include": "a list of glob patterns",
    "exclude": "a list of glob patterns",
    "docs_url": "a URL string",
}
_TABLES = {"check"}
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


class ConfigError(Exception):
    """A problem in akm.toml, reported as `akm.toml:LINE:COL: error: …` (exit 2)."""

    def __init__(self, path: Path, line: int, column: int, message: str) -> None:
        super().__init__(f"{path}:{line}:{column}: error: {message}")


class CheckConfig:
    """The `[check]` settings (a plain class: the warm check path does not load `dataclasses`)."""

    def __init__(self) -> None:
        self.strict = False
        self.select: list[str] = []  # empty: every code
        self.ignore: list[str] = []
        self.include: list[str] = []  # empty: every *.akm
        self.exclude: list[str] = []
        self.docs_url: str | None = None  # where the diagnostic pages are published, `{code}` for the code

    def reports(self, code: str) -> bool:
        """Whether a diagnostic with this code is reported (a code or a prefix such as `W` or `E4`)."""
        if self.select and not any(code.startswith(s) for s in self.select):
            return False
        return not any(code.startswith(i) for i in self.ignore)

    def checks(self, relative: str) -> bool:
        """Whether a workflow at this root-relative path is checked."""
        if self.include and not any(_glob(p).fullmatch(relative) for p in self.include):
            return False
        return not any(_glob(p).fullmatch(relative) for p in self.exclude)


def load(root: Path) -> CheckConfig:
    """The `[check]` configuration of the workspace at `root` (defaults when there is no akm.toml)."""
    path = root / FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return CheckConfig()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(path, 1, 1, f"cannot read it: {error}") from None
    if not text.strip():
        return CheckConfig()  # the common marker file: no need to load a TOML parser
    import tomllib  # late: about 3 ms (datetime with it), which the common empty akm.toml never needs

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        where = _TOML_POSITION.search(str(error))
        line, column = (int(where.group(1)), int(where.group(2))) if where else (1, 1)
        raise ConfigError(path, line, column, f"not valid TOML: {_TOML_POSITION.sub('', str(error)).strip()}") from None
    for table in document:
        if table not in _TABLES:
            raise ConfigError(
                path, *_locate(text, None, table), f"unknown table or key `{table}`; akm.toml has `[check]`"
            )
    check = document.get("check", {})
    if not isinstance(check, dict):
        raise ConfigError(path, *_locate(text, None, "check"), "`check` must be a table: `[check]`")
    config = CheckConfig()
    for key, value in check.items():
        if key not in _KEYS:
            hint = did_you_mean(key, list(_KEYS)) or f"known keys: {', '.join(_KEYS)}"
            raise ConfigError(path, *_locate(text, "check", key), f"unknown key `{key}` in [check]; {hint}")
        problem = _problem(key, value)
        if problem:
            raise ConfigError(path, *_locate(text, "check", key), f"[check] {key} {problem}")
        setattr(config, key, value)
    return config


def _problem(key: str, value: Any) -> str | None:
    if key == "docs_url":
        return _url_problem(value)
    if key == "strict":
        return None if isinstance(value, bool) else f"must be {_KEYS[key]} (true or false), not {value!r}"
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f'must be {_KEYS[key]}, such as ["W700"]' if key in ("select", "ignore") else f"must be {_KEYS[key]}"
    if key in ("select", "ignore"):
        return code_problem(value)
    bad = [v for v in value if not v or v.startswith("/") or ".." in v.split("/")]
    return f"has a pattern that is not relative to the root: {bad[0]!r}" if bad else None


def _url_problem(value: Any) -> str | None:
    """Why `docs_url` is not a page address with one `{code}` placeholder, or None."""

    if not isinstance(value, str):
        return f'must be {_KEYS["docs_url"]}, such as "https://docs.example.com/akm/diagnostics/{{code}}.html"'
    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or re.search(r"[\s\x00-\x1f]", value)
    ):
        return f"must be an http or https URL with a host and no spaces, not {value!r}"
    if value.count("{code}") != 1:
        return f"must contain `{{code}}` once, where a diagnostic code goes, not {value!r}"
    if "{" in value.replace("{code}", "") or "}" in value.replace("{code}", ""):
        return f"has a brace that is not `{{code}}`: `{{code}}` is its only placeholder, in {value!r}"
    return None


def code_problem(codes: list[str]) -> str | None:
    """Why a list of codes or prefixes is invalid, or None."""
    for code in codes:
        if not code or not any(known.startswith(code) for known in CATALOG):
            return f"names `{code}`, which is neither a diagnostic code nor a prefix of one (such as `W` or `E4`)"
    return None


def _locate(text: str, table: str | None, key: str) -> tuple[int, int]:
    """Line and column of `key` (in `[table]` when given) in the TOML text; (1, 1) when not found."""
    current: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.fullmatch(r"\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?", stripped)
        if header:
            current = header.group(1)
            if table is None and current == key:
                return number, line.index("[") + 1
            continue
        match = re.match(r"\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=", line)
        if match and match.group(1).strip('"') == key and (current == table or (table is None and current is None)):
            return number, match.start(1) + 1
    return 1, 1


def _glob(pattern: str) -> re.Pattern[str]:
    """A root-relative glob: `*` and `?` stay within a directory, `**` crosses them."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)
