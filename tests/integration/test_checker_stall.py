"""`stall_after` and `on_stall` (operations.md D6): where they stand, their bounds, W707 against the
effective timeout, and the plan keys they lower to (`stallAfterMs`, `onStall`, `features: ["stall"]`)."""

from __future__ import annotations

from helpers import Checker, source


def test_stall_settings_lower_to_the_step_and_name_the_feature(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          defaults { stall_after = 5m }
          step a { shell "x" }
          step b { shell "x" stall_after = 30s on_stall = terminate }
          step c { approval "ok?" }
        }
    """)
    result = codes.result(src)
    assert result.report.diagnostics == [] and result.plan is not None
    a, b, c = result.plan["steps"]
    assert (a["stallAfterMs"], "onStall" not in a) == (300_000, True)
    assert (b["stallAfterMs"], b["onStall"]) == (30_000, "terminate")
    assert "stallAfterMs" not in c  # a default reaches only the steps whose kind honours it
    assert result.plan["features"] == ["stall"]


def test_a_plan_without_stall_settings_has_no_stall_keys(codes: Checker) -> None:
    result = codes.result('workflow "w" {\n  step a { shell "x" timeout = 1m }\n}\n')
    assert result.plan is not None and "features" not in result.plan
    assert not {"stallAfterMs", "onStall"} & set(result.plan["steps"][0])


def test_map_blocks_take_stall_settings_and_a_duplicate_with_the_step_is_e201(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { xs: list[string] = ["a"] }
          step m {
            map params.xs { shell "x" stall_after = 10s }
          }
          step n {
            map params.xs { shell "x" stall_after = 10s }
            stall_after = 20s
          }
        }
    """)
    assert codes(src) == ["E201@8"]


def test_stall_settings_where_no_process_runs_are_e207(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { p: string = "x" }
          step a { approval "ok?" stall_after = 1m }
          step b { uses "child" on_stall = terminate }
          step c { route params.p { _ -> d } stall_after = 1m }
          step d { shell "x" }
          limits { stall_after = 1m }
        }
    """)
    assert codes(src, files={"child.akm": 'workflow "c" {\n  step s { shell "x" }\n}\n'}) == [
        "E207@7",
        "E207@3",
        "E207@4",
        "E207@5",
    ]


def test_stall_values_are_checked(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a { shell "x" stall_after = 500ms }
          step b { shell "x" stall_after = 25h }
          step c { shell "x" stall_after = 0s }
          step d { shell "x" stall_after = 1m on_stall = termnate }
          step e { shell "x" on_stall = terminate }
        }
    """)
    found = codes.diagnostics(src)
    assert [f"{d.code}@{d.span.line}" for d in found] == ["E601@2", "E601@3", "E601@4", "E207@5", "E207@6"]
    assert found[3].help is not None and "terminate" in found[3].help


def test_w707_when_stall_after_is_not_shorter_than_the_effective_timeout(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          limits { timeout = 1h }
          defaults { timeout = 10m }
          step a { shell "x" stall_after = 10m }
          step b { shell "x" stall_after = 9m }
          step c { shell "x" timeout = 2h stall_after = 90m }
          step d { map params.xs { shell "x" timeout = 1m stall_after = 2m } }
          params { xs: list[string] = [] }
        }
    """)
    assert codes(src) == ["W707@4", "W707@7"]


def test_retry_on_stalled_is_a_reason_but_retry_n_keeps_its_reasons(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a { shell "x" retry = 2 }
          step b { shell "x" retry = { max = 1, on = [stalled, timeout] } stall_after = 1m on_stall = terminate }
        }
    """)
    result = codes.result(src)
    assert result.plan is not None
    a, b = result.plan["steps"]
    assert a["retry"]["on"] == ["exit", "timeout", "spawn_error", "output_invalid"]
    assert b["retry"]["on"] == ["timeout", "stalled"]


def test_a_steps_own_retry_on_stalled_where_no_attempt_can_stall_is_e207(codes: Checker) -> None:
    """An attempt ends `stalled` only under `on_stall = terminate` (its own or the default's): a step's
    own `retry` on `stalled` anywhere else could never retry for it. A default `retry` is not judged."""
    src = source("""
        workflow "w" {
          DEFAULTS
          step a { shell "x" retry = { max = 1, on = [exit, stalled] } STALL }
          step b { map params.xs { shell "x" retry = { max = 1, on = [stalled] } STALL } }
          params { xs: list[string] = ["x"] }
        }
    """)
    assert codes(src.replace("DEFAULTS", "").replace("STALL", "")) == ["E207@3", "E207@4"]
    assert codes(src.replace("DEFAULTS", "").replace("STALL", "stall_after = 1m on_stall = warn")) == [
        "E207@3",
        "E207@4",
    ]
    assert codes(src.replace("DEFAULTS", "").replace("STALL", "stall_after = 1m on_stall = terminate")) == []
    terminating = "defaults { stall_after = 1m on_stall = terminate }"
    assert codes(src.replace("DEFAULTS", terminating).replace("STALL", "")) == []
    assert codes(src.replace("DEFAULTS", terminating).replace("STALL", "on_stall = warn")) == ["E207@3", "E207@4"]
    by_default = source("""
        workflow "w" {
          defaults { retry = { max = 1, on = [stalled] } }
          step a { shell "x" }
          step b { shell "x" stall_after = 1m on_stall = terminate }
        }
    """)
    assert codes(by_default) == []
    assert codes(src.replace("DEFAULTS", "").replace("STALL", "").replace("max = 1", "max = 0")) == []


def test_a_default_on_stall_that_no_step_takes_is_e207(codes: Checker) -> None:
    """`defaults { on_stall }` without a `stall_after` reaches only the steps with their own
    `stall_after` and no `on_stall`: with none, a run would ignore it, so the checker rejects it."""
    src = source("""
        workflow "w" {
          defaults { on_stall = terminate }
          step a { shell "x" }
          step b { shell "x" STALL }
        }
    """)
    assert codes(src.replace("STALL", "")) == ["E207@2"]
    assert codes(src.replace("STALL", "stall_after = 1m on_stall = warn")) == ["E207@2"]
    taken = codes.result(src.replace("STALL", "stall_after = 1m"))
    assert taken.report.diagnostics == [] and taken.plan is not None
    assert taken.plan["steps"][1]["onStall"] == "terminate" and "onStall" not in taken.plan["steps"][0]
    in_defaults = src.replace("on_stall = terminate", "stall_after = 1m on_stall = terminate")
    assert codes(in_defaults.replace("STALL", "")) == []


def test_a_value_already_reported_is_not_judged_again(codes: Checker) -> None:
    """One diagnostic per wrong value: an out-of-range integer is E102 only (not also E601 "not 0"),
    an out-of-bounds `stall_after` E601 only (not also E207 for the `on_stall` beside it)."""
    src = source("""
        workflow "w" {
          limits { max_tokens = 18446744073709551616 }
          defaults { stall_after = 25h  on_stall = terminate }
          step a { agent "x"  stall_after = 0s  on_stall = terminate  max_tokens = 1__0 }
          step b { shell "x"  on_stall = termnate }
          step c { shell "x"  retry = { max = 99999999999999999999 } }
        }
    """)
    assert codes(src) == ["E102@2", "E102@4", "E102@6", "E601@3", "E601@4", "E207@5"]
    params = 'workflow "w" {\n  params { n: int(min: 1) = 99999999999999999999  r: number(min: 1) = 1__0.5 }\n  step a { shell "x"  inputs = [params.n, params.r] }\n}\n'
    assert codes(params) == ["E102@2", "E102@2"]


def test_w707_for_a_default_stall_after_is_said_once_at_the_default(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          defaults { stall_after = 10m }
          step a { shell "x" timeout = 5m }
          step b { shell "x" timeout = 2m }
          step c { shell "x" }
        }
    """)
    found = codes.diagnostics(src)
    assert [f"{d.code}@{d.span.line}" for d in found] == ["W707@2"]
    assert "5m" in found[0].message
    # a step's own stall_after is judged where it is written, as before
    assert codes(src.replace("timeout = 2m }", "timeout = 2m stall_after = 3m }")) == ["W707@2", "W707@4"]
