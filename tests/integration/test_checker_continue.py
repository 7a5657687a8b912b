"""A step that may fail and continue (`on_error = continue`, its own or from `defaults`) reads as
`T | null`: W705 where it is read, E305 and E307 where null does not fit (operations.md D3.4)."""

from __future__ import annotations

import subprocess
import sys

from test_checker import CHILD

from helpers import Checker, source


def test_inputs_map_and_route_subjects_reading_a_continuing_step_warn(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step s { shell "x" output: { files: list[string], mode: "a" | "b" }  on_error = continue }
          step i { shell "y" inputs = [steps.s.output] }
          step m { map steps.s.output.files { shell "z" } }
          step r { route steps.s.output.mode { "a" -> x  "b" -> x } }
          step x { shell "x" }
        }
    """)
    found = codes.diagnostics(src)
    assert [f"{d.code}@{d.span.line}" for d in found] == ["W705@3", "W705@4", "W705@5"]
    assert all(d.help is not None and "`on_error = continue`" in d.help for d in found)
    assert "step `s` may fail and continue" in found[0].message


def test_on_error_continue_from_defaults_is_named_in_the_help(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          defaults { on_error = continue }
          step s { shell "x" }
          step f { shell "x" on_error = fail }
          step i { shell "y" inputs = [steps.s.output, steps.f.output] }
        }
    """)
    [d] = codes.diagnostics(src)
    assert (d.code, d.span.line, d.span.column) == ("W705", 5, 38)
    assert d.help is not None and "from `defaults`" in d.help


def test_an_output_reading_a_continuing_step_must_admit_null(codes: Checker) -> None:
    def wf(output: str) -> str:
        return source(f"""
            workflow "w" {{
              outputs {{ {output} }}
              step s {{ shell "x" output: string  on_error = continue }}
            }}
        """)

    [d] = codes.diagnostics(wf("o: string = steps.s.output"))
    assert d.code == "E305" and d.help is not None
    assert "`on_error = continue`" in d.help and "string | null" in d.help
    assert codes(wf("o: string | null = steps.s.output")) == []
    assert codes(wf("o = steps.s.output")) == []
    assert codes(wf("o: any = steps.s.output")) == []


def test_a_binding_reading_a_continuing_step_must_fit_a_nullable_param(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          defaults { on_error = continue }
          step s { shell "x" output: string }
          step u { uses "child" { environment = steps.s.output }  on_error = fail }
        }
    """)
    [d] = codes.diagnostics(src, files={"child.akm": CHILD})
    assert d.code == "E307" and d.help is not None and "from `defaults`" in d.help


def test_a_continuing_uses_step_and_a_child_that_continues(codes: Checker) -> None:
    """A `uses` step that continues reads as null; a child whose output reads a step of its own that
    continues exports `T | null`, so binding it on to a grandchild's string param is E307."""
    inner = source("""
        workflow "inner" {
          outputs { name = steps.n.output }
          step n { shell "x" output: string  on_error = continue }
        }
    """)
    src = source("""
        workflow "w" {
          step c { uses "inner"  on_error = continue }
          step d { shell "y" inputs = [steps.c.output] }
          step e { uses "inner" }
          step g { uses "child" { environment = steps.e.output.name } }
        }
    """)
    assert sorted(codes(src, files={"inner.akm": inner, "child.akm": CHILD})) == ["E307@5", "W705@3"]


def test_what_does_not_warn(codes: Checker) -> None:
    """An approval under continue completes with its decision when rejected, so reading it is fine;
    a continuing step's own inputs are not reads of it."""
    src = source("""
        workflow "w" {
          params { p: string }
          step a { approval "ok?"  on_error = continue }
          step b { shell "x" inputs = [steps.a.output.approved, params.p]  on_error = continue }
          outputs { ok: bool = steps.a.output.approved }
        }
    """)
    assert codes(src) == []


def test_a_step_both_skippable_and_continuing_gets_both_warnings(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { m: "a" | "b" }
          step r { route params.m { "a" -> x  "b" -> y } }
          step x { shell "x"  on_error = continue }
          step y { shell "y" }
          step z { shell "z" inputs = [steps.x.output] }
        }
    """)
    assert sorted(codes(src)) == ["W702@6", "W705@6"]


def test_strict_check_fails_on_w705(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step s { shell "x"  on_error = continue }
          step i { shell "y" inputs = [steps.s.output] }
        }
    """)
    codes.write({"wf.akm": src})
    run = [sys.executable, "-m", "akmc", "check", "--no-cache"]
    lax = subprocess.run([*run, "wf.akm"], cwd=codes.root, capture_output=True, text=True, check=False)
    strict = subprocess.run([*run, "--strict", "wf.akm"], cwd=codes.root, capture_output=True, text=True, check=False)
    assert lax.returncode == 0 and "warning[W705]" in lax.stdout
    assert strict.returncode == 1 and "warning[W705]" in strict.stdout


# -- a map over `uses` is a list of the child's outputs ---------------------------------------------

SITE = source("""
    workflow "site" {
      params { environment: string }
      outputs { url: string = steps.a.output.url }
      step a { shell "x" inputs = [params.environment] output: { url: string } }
    }
""")
BARE = source("""
    workflow "bare" {
      params { environment: string }
      step a { shell "x" inputs = [params.environment] }
    }
""")


def mapped(last: str) -> str:
    return source(f"""
        workflow "w" {{
          params {{ envs: list[string] }}
          step m {{ map params.envs {{ uses "site" {{ environment = item }} }} }}
          step b {{ map params.envs {{ uses "bare" {{ environment = item }} }} }}
          {last}
        }}
    """)


def test_a_map_over_uses_is_typed_as_a_list_of_the_child_outputs(codes: Checker) -> None:
    files = {"site.akm": SITE, "bare.akm": BARE}
    good = 'step r { shell "y" inputs = [steps.m.output[0].url, steps.m.output, steps.b.output[1].runId] }'
    assert codes(mapped(good), files=files) == []
    bad = codes.diagnostics(mapped('step r { shell "y" inputs = [steps.m.output[0].urlx] }'), files=files)
    assert [d.code for d in bad] == ["E407"] and bad[0].help is not None and "url" in bad[0].help
    assert codes(mapped('step r { shell "y" inputs = [steps.b.output[0].url] }'), files=files) == ["E407@5"]
    assert codes(mapped('step r { shell "y" inputs = [steps.m.output.url] }'), files=files) == ["E302@5"]
    assert codes(mapped('step r { map steps.m.output[0] { shell "y" } }'), files=files) == ["E303@5"]
    typed = "outputs { first: string = steps.m.output[0].url  all: list[{ url: string }] = steps.m.output }"
    assert codes(mapped(typed), files=files) == []
    assert codes(mapped("outputs { first: int = steps.m.output[0].url }"), files=files) == ["E305@5"]
