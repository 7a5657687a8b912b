"""Pattern refinements: only patterns whose matching time their structure bounds reach a plan."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run.patterns import unsafe
from akm_run.plan import PlanError, verify_plan
from profiles import examples

CATASTROPHIC = [
    "^(a+)+$",
    "(a*)*b",
    "(\\w+\\s?)*$",
    "(x+x+)+y",
    "(a|aa)*c",
    "(?:a|b|ab)*c",
    "(a{1,3})+$",
    "(a+){10}$",
    "^.*.*=.*$",
    "\\d+\\d*x",
    "(a)\\1",
    "(a)?(?(1)a|b)",
]
SAFE = [
    "^[a-z]+$",
    "^[0-9]+\\.[0-9]+\\.[0-9]+$",
    "(\\d{1,3}\\.){3}\\d{1,3}",
    "^[a-z]+(-[a-z]+)*$",
    "^(foo|bar)+$",
    "(\\.[a-z]+)*",
    "^(https?://)?[a-z.]+$",
    "(?>a+)+b",
    "a++b",
    "^[A-Za-z_][A-Za-z0-9_]*$",
    "^\\S+@\\S+$",
    "",
    "^(a|b)*$",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_are_refused(pattern: str) -> None:
    assert unsafe(pattern) is not None


@pytest.mark.parametrize("pattern", SAFE)
def test_everyday_patterns_are_accepted(pattern: str) -> None:
    assert unsafe(pattern) is None


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet="ab()|*+?{}^$.\\1,-", max_size=16))
def test_any_compiling_pattern_gets_an_answer(pattern: str) -> None:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return
    why = unsafe(pattern)
    assert why is None or why.startswith(("it ", "two ", "alternatives "))


def test_plan_verification_refuses_an_unsafe_pattern() -> None:
    plan: dict[str, Any] = {
        "irVersion": 1,
        "ref": "w",
        "title": "w",
        "sourceReadSet": [{"path": "w.akm"}],
        "limits": {"concurrency": 4},
        "steps": [],
        "params": {"p": {"schema": {"type": "string", "pattern": "^(a+)+$"}}},
    }
    with pytest.raises(PlanError, match="backtrack"):
        verify_plan(plan)
    plan["params"]["p"]["schema"]["pattern"] = "^a+$"
    verify_plan(plan)
