"""Durations, one grammar: whole numbers with units `h`, `m`, `s` and `ms` (`1h30m`, `250ms`).

The language writes them in settings (`timeout = 10m`); `akm-run run --timeout` takes the same parts
in order from the largest unit, or a bare number of seconds; renderers write milliseconds back the
way the language does."""

from __future__ import annotations

import re

from akm_run import wording

UNIT_MS = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
PART = re.compile(r"([0-9]+)(ms|s|m|h)")  # `ms` before `m`: `5ms` is five milliseconds
FULL = re.compile(r"(?:[0-9]+(?:ms|s|m|h))+")


def parse(text: str) -> int | None:
    """Milliseconds of a duration as the language writes it (parts in any order), or None."""
    if not FULL.fullmatch(text):
        return None
    return sum(int(number) * UNIT_MS[unit] for number, unit in PART.findall(text))


def parse_option(text: str) -> int:
    """Milliseconds of a command-line duration: `2h`, `1h30m`, `90s`, `250ms`, each unit at most once
    and largest first; a bare number is seconds. Raises ValueError."""
    if text.isascii() and text.isdigit():  # int() takes other scripts' digits too
        return int(text) * 1000
    parts = PART.findall(text) if FULL.fullmatch(text) else []
    sizes = [UNIT_MS[unit] for _, unit in parts]
    if not parts or sizes != sorted(set(sizes), reverse=True):
        raise ValueError(wording.invalid_duration(text=text))
    return sum(int(number) * UNIT_MS[unit] for number, unit in parts)


DAY_MS = 24 * UNIT_MS["h"]
DAYS = re.compile(r"([0-9]+)d(.*)")


def parse_age(text: str, name: str) -> int:
    """Milliseconds of an age on the command line (`prune --older-than`, `$AKM_RUN_RETENTION`): days
    first (`30d`, `1d12h`), then what parse_option reads (`12h`, `90m`, a bare number of seconds).
    Raises ValueError, naming the option or variable (`name`) in its message."""
    days = DAYS.fullmatch(text) if text.isascii() else None
    try:
        if days is None:
            return parse_option(text)
        rest = days.group(2)
        if rest.isdigit():  # `1d30`: thirty of what?
            raise ValueError(text)
        return int(days.group(1)) * DAY_MS + (parse_option(rest) if rest else 0)
    except ValueError:
        raise ValueError(wording.invalid_age(name=name, text=text)) from None


def format_ms(ms: int) -> str:
    """Milliseconds as the language writes them: 2h, 1h30m, 90s → 1m30s, 250ms."""
    parts, rest = [], ms
    for unit in ("h", "m", "s"):
        size = UNIT_MS[unit]
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    if rest or not parts:
        parts.append(f"{rest}ms")
    return "".join(parts)
