"""The one duration grammar (akm_run.durations): the language's, the command line's, and back."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akm_run import durations

# The `--timeout` grammar akm-run had before the one duration grammar: it must accept the same texts.
_OPTION_BEFORE = re.compile(r"(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?")


def _option_before(text: str) -> int | None:
    if text.isdigit():
        return int(text) * 1000
    match = _OPTION_BEFORE.fullmatch(text)
    if not text or match is None or not any(match.groups()):
        return None
    h, m, s, ms = (int(g or 0) for g in match.groups())
    return ((h * 60 + m) * 60 + s) * 1000 + ms


def _option_now(text: str) -> int | None:
    try:
        return durations.parse_option(text)
    except ValueError:
        return None


@given(st.text(alphabet="0123456789hms", max_size=10))
def test_the_command_line_duration_grammar_is_unchanged(text: str) -> None:
    assert _option_now(text) == _option_before(text)


@pytest.mark.parametrize(
    ("text", "ms"), [("2h", 7_200_000), ("1h30m", 5_400_000), ("90s", 90_000), ("250ms", 250), ("30s1h", 3_630_000)]
)
def test_language_durations(text: str, ms: int) -> None:
    assert durations.parse(text) == ms


@given(st.integers(min_value=0, max_value=10**10))
def test_a_formatted_duration_reads_back_as_the_same_milliseconds(ms: int) -> None:
    assert durations.parse(durations.format_ms(ms)) == ms
    assert durations.parse_option(durations.format_ms(ms)) == ms


# -- ages (`prune --older-than`, `$AKM_RUN_RETENTION`): days first, then what an option takes ------------


@given(
    st.text(max_size=12)
    | st.from_regex(r"[0-9]{1,4}d(?:[0-9]{1,3}[hms]){0,2}", fullmatch=True)
    | st.from_regex(r"[0-9]{1,3}(?:h|m|s|ms)", fullmatch=True)
)
def test_an_age_is_a_whole_number_of_milliseconds_or_a_refusal_naming_its_option(text: str) -> None:
    try:
        age = durations.parse_age(text, "--older-than")
    except ValueError as error:
        assert str(error) == f"--older-than: invalid age {text!r} (use e.g. 30d, 1d12h, 12h, 90m)"
    else:
        assert isinstance(age, int) and age >= 0
        days, _, rest = text.partition("d")
        if "d" not in text:  # no days: exactly what an option takes
            assert age == durations.parse_option(text)
        else:
            assert age == int(days) * durations.DAY_MS + (durations.parse_option(rest) if rest else 0)


@given(st.integers(0, 10_000), st.integers(0, 23))
def test_days_and_hours_add_up(days: int, hours: int) -> None:
    assert durations.parse_age(f"{days}d{hours}h", "x") == (days * 24 + hours) * 3_600_000
