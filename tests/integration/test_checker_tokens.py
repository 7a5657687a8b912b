"""Token budgets in the checker (operations.md D8): where `max_tokens` stands, what it lowers to,
and W706 when no agent unit in the tree could ever report usage."""

from __future__ import annotations

from typing import Any

from helpers import Checker, source


def _plan(codes: Checker, src: str, files: dict[str, str | bytes] | None = None) -> dict[str, Any]:
    result = codes.result(src, files=files)
    assert result.plan is not None, [d.code for d in result.report.diagnostics]
    return result.plan


def test_limits_and_step_budgets_lower_to_the_plan(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { files: list[string] }
          limits { max_tokens = 2_000_000 }
          defaults { max_tokens = 10_000 }
          step s { shell "ls" }
          step m { map params.files { agent "review {{item}}"  max_tokens = 150_000 } }
          step a { agent "summarise" }
          step b { agent "again"  max_tokens = 5 }
        }
    """)
    plan = _plan(codes, src)
    assert plan["limits"]["maxTokens"] == 2_000_000 and plan["features"] == ["tokens"]
    budgets = {step["stepId"]: step.get("maxTokens") for step in plan["steps"]}
    assert budgets == {"s": None, "m": 150_000, "a": 10_000, "b": 5}  # a default reaches agents only


def test_max_tokens_where_no_agent_runs_is_e207(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { xs: list[int]  mode: "a" | "b" }
          step r { route params.mode { "a" -> s  "b" -> s } max_tokens = 5 }
          step s { shell "ls"  max_tokens = 5 }
          step m { map params.xs { script "s.sh"  max_tokens = 5 } }
          step u { uses "child"  max_tokens = 5 }
          step p { approval "ok?"  max_tokens = 5 }
        }
    """)
    child = 'workflow "c" {\n  step a {\n    shell "x"\n  }\n}\n'
    found = codes(src, files={"s.sh": "#!/bin/sh\n", "child.akm": child})
    assert found == ["E207@3", "E207@4", "E207@5", "E207@6", "E207@7"]


def test_zero_tokens_is_out_of_bounds(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          limits { max_tokens = 0 }
          step a { agent "x"  max_tokens = 0 }
        }
    """)
    assert codes(src) == ["E601@2", "E601@3"]


def test_a_tree_budget_without_agents_warns_w706(codes: Checker) -> None:
    src = 'workflow "w" {\n  limits { max_tokens = 100 }\n  step c {\n    uses "child"\n  }\n}\n'
    shell_child = 'workflow "c" {\n  step a {\n    shell "x"\n  }\n}\n'
    agent_child = 'workflow "c" {\n  step a {\n    agent "x"\n  }\n}\n'
    assert codes(src, files={"child.akm": shell_child}) == ["W706@2"]
    assert codes(src, files={"child.akm": agent_child}) == []  # an agent in a child can spend


def test_an_agent_in_a_parallel_block_or_its_child_binds_the_budget(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          limits { max_tokens = 1000 }
          parallel p {
            step a { BODY }
            step b { shell "echo 1" }
          }
        }
    """)
    assert codes(src.replace("BODY", 'agent "do it"')) == []
    agent_child = 'workflow "c" {\n  parallel q {\n    step a {\n      agent "x"\n    }\n  }\n}\n'
    shell_child = 'workflow "c" {\n  parallel q {\n    step a {\n      shell "x"\n    }\n  }\n}\n'
    assert codes(src.replace("BODY", 'uses "child"'), files={"child.akm": agent_child}) == []
    assert codes(src.replace("BODY", 'uses "child"'), files={"child.akm": shell_child}) == ["W706@2"]
