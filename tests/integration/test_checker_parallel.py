"""`parallel` blocks in the checker (operations.md D1): members read only what comes before the block
(E210), a block is non-empty, flat and route-free (E211), routes select the block but not a member
(E208), ids are unique across blocks (E200), the block's settings (E207, E601), and its output
type `{member: T}`, `T | null` for a member that may fail and continue."""

from __future__ import annotations

import pytest

from helpers import Checker, source


def _wf(block: str, after: str = "") -> str:
    return source(f"""
        workflow "w" {{
          params {{ mode: string }}
          step first {{ shell "x" inputs = [params.mode] }}
          {block}
          {after}
        }}
    """)


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ('parallel checks { step a { shell "a" inputs = [steps.first.output] } step b { shell "b" } }', []),
        ('parallel checks { step a { shell "a" inputs = [steps.b.output] } step b { shell "b" } }', ["E210@4"]),
        ('parallel checks { step a { shell "a" } step b { shell "b" inputs = [steps.a.output] } }', ["E210@4"]),
        ('parallel checks { step a { shell "a" inputs = [steps.checks.output] } }', ["E210@4"]),
        ("parallel checks { }", ["E211@4"]),
        ('parallel checks { step a { shell "a" } parallel inner { step b { shell "b" } } }', ["E211@4"]),
        ("parallel checks { step r { route params.mode { _ -> first } } }", ["E211@4", "E208@4"]),
        ('parallel checks { step first { shell "a" } }', ["E200@4"]),
        ('parallel checks { concurrency = 2  fail_fast = false  on_error = continue  step a { shell "a" } }', []),
        ('parallel checks { concurrency = 0  step a { shell "a" } }', ["E601@4"]),
        ('parallel checks { timeout = 5s  step a { shell "a" } }', ["E207@4"]),
        ('parallel checks { fail_fast = 1  step a { shell "a" } }', ["E207@4"]),
    ],
)
def test_block_checks(codes: Checker, block: str, expected: list[str]) -> None:
    assert codes(_wf(block)) == expected


def test_a_route_selects_the_block_but_not_a_member(codes: Checker) -> None:
    block = 'parallel checks { step a { shell "a" } }'
    route = 'step pick {{ route params.mode {{ "x" -> {} _ -> done }} }}'
    src = source(f"""
        workflow "w" {{
          params {{ mode: string }}
          {route.format("checks")}
          {block}
          step done {{ shell "d" }}
        }}
    """)
    assert codes(src) == []
    [found] = codes.diagnostics(src.replace('"x" -> checks', '"x" -> a'))
    assert found.code == "E208" and found.help is not None and "`checks`" in found.help


def test_too_many_members(codes: Checker) -> None:
    members = " ".join(f'step m{i} {{ shell "x" }}' for i in range(65))
    assert codes(_wf(f"parallel checks {{ {members} }}")) == ["E601@4"]


def test_later_steps_read_members_and_the_block_as_an_object(codes: Checker) -> None:
    block = source("""
        parallel checks {
          step lint { shell "l" }
          step test { shell "t" output: { passed: int } }
          step audit { shell "a" output: string  on_error = continue }
        }
    """).replace("\n", " ")
    outputs = "outputs {{ o: {} = steps.checks.output }}"
    good = "{ lint: any, test: { passed: int }, audit: string | null }"
    assert codes(_wf(block, outputs.format(good))) == []
    assert codes(_wf(block, outputs.format("{ lint: any, test: { passed: int }, audit: string }"))) == ["E305@5"]
    assert codes(_wf(block, 'step r { shell "r" inputs = [steps.test.output.passed, steps.checks.output.lint] }')) == []
    assert codes(_wf(block, 'step r { shell "r" inputs = [steps.audit.output] }')) == ["W705@5"]
