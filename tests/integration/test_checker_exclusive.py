"""`limits { exclusive = true | params.NAME }` (operations.md D10.3): where it may stand, what it takes
(E205, E207), and the plan key it lowers to, shown by `akmc plan` and kept by `akmc fmt`."""

from __future__ import annotations

from pathlib import Path

from akmc.compiler import check_file
from akmc.formatter import format_source
from akmc.render import plan as plan_text
from akmc.render import summary
from helpers import Checker, source

PARAMS = 'params { env: "staging" | "prod"  tags: list[string] = []  n: int = 1  o: { a: int } = { a = 1 } }\n'


def _workflow(
    limits: str, step: str = 'step a { shell "x" inputs = [params.env, params.tags, params.n, params.o] }'
) -> str:
    return f'workflow "w" {{\n{PARAMS}limits {{ {limits} }}\n{step}\n}}\n'


def test_exclusive_takes_true_false_or_a_scalar_param(codes: Checker) -> None:
    for accepted in ("exclusive = true", "exclusive = false", "exclusive = params.env", "exclusive = params.n"):
        assert codes(_workflow(accepted)) == [], accepted
    assert codes(_workflow("exclusive = params.tags")) == ["E207@3"]
    assert codes(_workflow("exclusive = params.o")) == ["E207@3"]
    assert codes(_workflow("exclusive = params.nope")) == ["E205@3"]
    for wrong in ('exclusive = "yes"', "exclusive = 1", "exclusive = [true]", "exclusive = steps.a.output"):
        assert codes(_workflow(wrong)) == ["E207@3"], wrong


def test_exclusive_belongs_in_limits_and_other_settings_take_no_reference(codes: Checker) -> None:
    step = 'step a { shell "x" inputs = [params.env, params.tags, params.n, params.o]  exclusive = true }'
    [misplaced] = codes.diagnostics(_workflow("concurrency = 2", step))
    assert misplaced.code == "E207" and "it belongs in `limits`" in misplaced.message
    [timeout] = codes.diagnostics(_workflow("timeout = params.n"))
    assert timeout.code == "E207" and "takes a duration" in timeout.message


def test_the_param_of_an_exclusive_workflow_counts_as_read(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { env: string }
          limits { exclusive = params.env }
          step a { shell "x" }
        }
    """)
    assert codes(src) == []


def test_the_plan_says_exclusive_and_review_shows_it(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "a.akm").write_text(_workflow("exclusive = params.env"))
    (tmp_path / "b.akm").write_text(_workflow("exclusive = true  concurrency = 2"))
    (tmp_path / "c.akm").write_text(_workflow("concurrency = 2"))
    plans = {name: check_file(tmp_path / name, name, tmp_path).plan for name in ("a.akm", "b.akm", "c.akm")}
    a, b, c = plans["a.akm"], plans["b.akm"], plans["c.akm"]
    assert a is not None and b is not None and c is not None
    assert a["limits"] == {"concurrency": 4, "exclusive": {"param": "env"}} and a["features"] == ["exclusive"]
    assert b["limits"] == {"concurrency": 2, "exclusive": True} and b["features"] == ["exclusive"]
    assert "exclusive" not in c["limits"] and "features" not in c
    assert summary.limits_text(dict(a["limits"])) == "concurrency 4, exclusive per params.env"
    assert "limits: concurrency 2, exclusive\n" in plan_text.render(dict(b), "sha256:x")


def test_fmt_keeps_the_reference() -> None:
    src = 'workflow "w" {\nparams { env: string }\nlimits {exclusive=params.env  concurrency=2}\nstep a { shell "x" }\n}\n'
    formatted = format_source(src).text
    assert "limits { concurrency = 2  exclusive = params.env }" in formatted
    assert format_source(formatted).text == formatted
