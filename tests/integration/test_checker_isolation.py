"""`isolation = worktree | none` (docs/language.md, "Settings"): where it may stand, which steps
honour it, how `defaults` reach them and `none` switches a default off, and what the plan says."""

from __future__ import annotations

from typing import Any

from helpers import Checker, source

CHILD = source("""
    workflow "child" {
      step a { shell "x" isolation = worktree }
    }
""")


def _isolated(codes: Checker, src: str) -> dict[str, Any]:
    """stepId → the plan's `isolation` (None: absent), and the plan's features."""
    result = codes.result(src, files={"child.akm": CHILD})
    assert result.plan is not None, [f"{d.code}@{d.span.line}" for d in result.report.diagnostics]
    steps = {step["stepId"]: step.get("isolation") for step in result.plan["steps"]}
    return {"steps": steps, "features": result.plan.get("features")}


def test_isolation_on_the_steps_that_run_a_process_and_in_a_map_block(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { xs: list[string] }
          step a { shell "x" isolation = worktree }
          step b { script "s.sh" isolation = worktree }
          step c { agent "do it" isolation = worktree }
          step d { map params.xs { agent "each" isolation = worktree } }
          step e { map params.xs { shell "each" } isolation = worktree }
          step f { shell "y" isolation = none }
        }
    """)
    codes.write({"s.sh": "#!/bin/sh\n"})
    assert codes(src) == []
    assert _isolated(codes, src) == {
        "steps": {"a": "worktree", "b": "worktree", "c": "worktree", "d": "worktree", "e": "worktree", "f": None},
        "features": ["worktree"],
    }


def test_a_default_reaches_only_the_steps_that_honour_it_and_none_switches_it_off(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params {
            xs: list[string]
            p: string = "x"
          }
          defaults { isolation = worktree }
          step a { shell "x" }
          step b { shell "x" isolation = none }
          step c { uses "child" }
          step d { approval "ok?" }
          step e { route params.p { "x" -> f } }
          step f { map params.xs { uses "child" } }
        }
    """)
    assert codes(src, files={"child.akm": CHILD}) == []
    isolated = _isolated(codes, src)
    assert isolated["steps"] == {"a": "worktree", "b": None, "c": None, "d": None, "e": None, "f": None}
    assert isolated["features"] == ["worktree"]  # the child's own step uses a worktree too


def test_a_plan_without_isolation_declares_no_feature(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          defaults { isolation = none }
          step a { shell "x" }
        }
    """)
    assert _isolated(codes, src) == {"steps": {"a": None}, "features": None}


def test_isolation_where_no_process_runs_is_e207(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params {
            xs: list[string]
            p: string
          }
          step a { uses "child" isolation = worktree }
          step b { approval "ok?" isolation = worktree }
          step c { route params.p { "x" -> e } isolation = worktree }
          step d { map params.xs { uses "child" isolation = worktree } }
          step e { shell "x" }
          limits { isolation = worktree }
        }
    """)
    assert sorted(codes(src, files={"child.akm": CHILD})) == ["E207@11", "E207@6", "E207@7", "E207@8", "E207@9"]


def test_isolation_twice_and_unknown_values(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { xs: list[string] }
          step a { map params.xs { shell "x" isolation = worktree } isolation = none }
          step b { shell "x" isolation = worktre }
          step c { shell "x" isolation = "worktree" }
        }
    """)
    assert codes(src) == ["E201@3", "E207@4", "E207@5"]
    [_, typo, _] = codes.diagnostics(src)
    assert typo.help == "did you mean `worktree`?"


def test_parallel_members_take_isolation_and_the_block_does_not(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          defaults { isolation = worktree }
          parallel checks {
            step lint { shell "x" }
            step audit { agent "look" isolation = none }
            step call { uses "child" }
          }
        }
    """)
    result = codes.result(src, files={"child.akm": CHILD})
    assert result.plan is not None and result.plan["features"] == ["parallel", "worktree"]
    [block] = result.plan["steps"]
    assert {m["stepId"]: m.get("isolation") for m in block["members"]} == {
        "lint": "worktree",
        "audit": None,
        "call": None,
    }
    on_block = source("""
        workflow "w" {
          parallel checks {
            isolation = worktree
            step lint { shell "x" }
          }
        }
    """)
    assert codes(on_block) == ["E207@3"]
