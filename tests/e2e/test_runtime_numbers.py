"""The numeric rule end to end: JSON numbers are values (`1.0` is `1`, `-0.0` is `0`), so an
output the checker types as `0 | 1` goes where the route the checker called exhaustive sends it,
is stored as the integer it is, and reads the same on both stores."""

from __future__ import annotations

import json

import pytest

from helpers import Runtime, source

PRINT = 'python3 -c \'import json,sys; print(json.load(sys.stdin)[\\"inputs\\"][\\"params.printed\\"])\''

ROUTED = source(f"""
    workflow "t" {{
      params {{ printed: string }}
      outputs {{ picked = steps.pick.output }}
      step pick {{
        shell "{PRINT}"
        inputs = [params.printed]
        output: 0 | 1
      }}
      step r {{ route steps.pick.output {{ 0 -> zero  1 -> one }} }}
      step zero {{ shell "echo zero" }}
      step one {{ shell "echo one" }}
    }}
""")


@pytest.mark.parametrize(
    ("printed", "value", "taken"),
    [("-0.0", 0, "zero"), ("0e5", 0, "zero"), ("1.0", 1, "one"), ("10E-1", 1, "one"), ("1", 1, "one")],
)
def test_an_integral_number_routes_by_its_value_and_is_stored_as_an_integer(
    runtime: Runtime, printed: str, value: int, taken: str
) -> None:
    plan = runtime.compile("wf.akm", ROUTED)
    code, document = runtime.run_json(plan, "--param", f"printed={printed}")
    assert code == 0, document
    assert document["exported"] == {"picked": value}
    pick_step = runtime.store().step(document["runId"], "pick")
    assert pick_step is not None
    stored = pick_step.output
    assert stored == value and type(stored) is int
    [(text,)] = runtime.sql("SELECT output_json FROM steps WHERE run_id = ? AND step_id = 'pick'", document["runId"])
    assert text == json.dumps(value)  # the same bytes on both stores
    statuses = {s.step_id: s.status for s in runtime.store().steps(document["runId"])}
    assert statuses[taken] == "completed" and statuses["one" if taken == "zero" else "zero"] == "skipped"


def test_a_number_that_is_no_member_of_the_type_is_refused_not_routed(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", ROUTED)
    code, document = runtime.run_json(plan, "--param", "printed=0.5")
    assert code == 1 and document["failure"]["reason"] == "output_invalid", document


def test_an_int_beyond_the_exact_range_is_refused(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step big {
            shell "echo 1e300"
            output: int
          }
        }
    """)
    code, document = runtime.run_json(runtime.compile("wf.akm", src))
    assert code == 1 and document["failure"]["reason"] == "output_invalid", document
    assert "integer" in document["failure"]["message"]


def test_a_plan_literal_written_as_a_float_matches_the_integer_it_equals(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          params { n: int = 2.0 }
          step r { route params.n { 1 -> one  2 -> two } }
          step one { shell "echo one" }
          step two { shell "echo two" }
        }
    """)
    code, document = runtime.run_json(runtime.compile("wf.akm", src))
    assert code == 0, document
    statuses = {s.step_id: s.status for s in runtime.store().steps(document["runId"])}
    assert statuses == {"r": "completed", "one": "skipped", "two": "completed"}
