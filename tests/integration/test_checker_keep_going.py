"""`fail_fast = true | false` (operations.md D3.1, D3.3): in a `map` block or on its step, not both
(E201), nowhere else (E207), a boolean; a map that keeps going under `on_error = continue` reads as
`list[T | null]`, never null as a whole."""

from __future__ import annotations

import pytest

from helpers import Checker, source


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ('map params.xs { fail_fast = false  shell "x" }', []),
        ('fail_fast = false  map params.xs { shell "x" }', []),
        ('fail_fast = true  map params.xs { fail_fast = false  shell "x" }', ["E201@3"]),
        ('fail_fast = false  shell "x"  inputs = [params.xs]', ["E207@3"]),
        ('fail_fast = false  approval "ok?"  inputs = [params.xs]', ["E207@3"]),
        ("fail_fast = false  route params.xs { _ -> z }", ["E207@3"]),
        ('map params.xs { fail_fast = 1  shell "x" }', ["E207@3"]),
        ('map params.xs { fail_fast = yes  shell "x" }', ["E207@3"]),
    ],
)
def test_where_fail_fast_may_stand(codes: Checker, step: str, expected: list[str]) -> None:
    src = source(f"""
        workflow "w" {{
          params {{ xs: list[string] }}
          step s {{ {step} }}
          step z {{ shell "z" }}
        }}
    """)
    assert codes(src) == expected


def test_fail_fast_is_not_a_default(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          defaults { fail_fast = false }
          step s { shell "x" }
        }
    """)
    assert codes(src) == ["E207@2"]


def _reader(fail_fast: str, on_error: str, declared: str) -> str:
    return source(f"""
        workflow "w" {{
          params {{ xs: list[string] }}
          outputs {{ o: {declared} = steps.s.output }}
          step s {{
            map params.xs {{ fail_fast = {fail_fast}  shell "x" }}
            output: list[{{ n: int }}]
            on_error = {on_error}
          }}
          step r {{ shell "y" inputs = [steps.s.output] }}
        }}
    """)


def test_a_map_that_keeps_going_and_continues_reads_as_a_list_of_nullable_items(codes: Checker) -> None:
    # every item ran: the list is never null as a whole (no W705), but a failed item's place is null
    assert codes(_reader("false", "continue", "list[{ n: int } | null]")) == []
    assert codes(_reader("false", "continue", "list[{ n: int }]")) == ["E305@3"]
    # keeping going under on_error = fail: a failure fails the run, so readers see list[T]
    assert codes(_reader("false", "fail", "list[{ n: int }]")) == []
    # fail fast under on_error = continue: the whole output may be null (D3.4)
    assert codes(_reader("true", "continue", "list[{ n: int }] | null")) == ["W705@9"]


def test_a_map_that_keeps_going_over_a_step_that_may_be_null_may_be_null_as_a_whole(codes: Checker) -> None:
    # its subject does not resolve when the step it reads failed and continued: the map fails before
    # any item runs, and continues as null
    text = source("""
        workflow "t" {
          step x {
            shell "exit 1"
            output: list[string]
            on_error = continue
          }
          step m {
            map steps.x.output {
              shell "echo 1"
              fail_fast = false
            }
            output: list[int]
            on_error = continue
          }
          outputs {
            o: OUT = steps.m.output
          }
        }
    """)
    assert codes(text.replace("OUT", "list[int | null]")) == ["E305@16", "W705@8"]
    assert codes(text.replace("OUT", "list[int | null] | null")) == ["W705@8"]
