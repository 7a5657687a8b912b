"""The grammar and the tree builder: every construct parses to the right AST; bad input to E100–E102."""

from __future__ import annotations

import pytest

from akmc import ast
from akmc.diagnostics import Report
from akmc.syntax import dedent_block, parse
from helpers import LANGUAGE_EXAMPLE


def parse_ok(src: str) -> ast.Workflow:
    report = Report("t.akm")
    workflow = parse(src, report)
    assert report.diagnostics == []
    assert workflow is not None
    return workflow


def errors(src: str) -> list[tuple[str, int, int, str]]:
    report = Report("t.akm")
    parse(src, report)
    return [(d.code, d.span.line, d.span.column, d.message) for d in report.diagnostics]


def step_items(src_items: str) -> list[ast.StepItem]:
    return parse_ok('workflow "w" {\n  step s {\n' + src_items + "\n  }\n}\n").steps[0].items


def test_the_language_reference_example_parses() -> None:
    workflow = parse_ok((LANGUAGE_EXAMPLE / "workflows" / "release.akm").read_text())
    assert [s.id.text for s in workflow.steps] == [
        "collect",
        "review",
        "verdict",
        "triage",
        "rework",
        "checklist",
        "signoff",
        "publish",
    ]
    assert [s.kind for s in workflow.sections] == ["description", "params", "outputs", "limits", "defaults"]


def test_spans_are_one_based_with_exclusive_end() -> None:
    workflow = parse_ok('workflow "w" {\n  step build {\n    shell "make"\n  }\n}\n')
    step = workflow.steps[0]
    assert (step.span.line, step.span.column, step.span.end_line, step.span.end_column) == (2, 3, 4, 4)
    assert (step.id.span.line, step.id.span.column, step.id.span.end_column) == (2, 8, 13)
    assert workflow.steps[0].id.span.start == len('workflow "w" {\n  step ')


@pytest.mark.parametrize(
    ("item", "kind", "attribute", "value"),
    [
        ('shell "make"', "shell", "text", ("string", "make")),
        ('agent file("p.md")', "agent", "text", ("file", "p.md")),
        ('approval "ok?"', "approval", "text", ("string", "ok?")),
    ],
)
def test_text_targets(item: str, kind: str, attribute: str, value: tuple[str, str]) -> None:
    """`value`: the text's kind and value."""
    (target,) = step_items(item)
    assert isinstance(target, ast.Target) and target.kind == kind
    text = getattr(target, attribute)
    assert (text.kind, text.value) == value


def test_script_and_uses_targets() -> None:
    (script,) = step_items('script "scripts/a.sh"')
    assert isinstance(script, ast.Target) and script.path is not None and script.path.value == "scripts/a.sh"
    (uses,) = step_items('uses "wf/child" {\n a = params.x\n b = [1, "two"]\n }')
    assert isinstance(uses, ast.Target) and uses.bindings is not None
    assert [b.name.text for b in uses.bindings] == ["a", "b"]
    assert isinstance(uses.bindings[0].value, ast.Reference)
    assert isinstance(uses.bindings[1].value, ast.ListValue)


def test_map_route_gate_env_inputs_output() -> None:
    items = step_items(
        """
        map steps.a.output.files[0].names { concurrency = 3 agent "x" }
        route steps.a.output.kind { "x" -> b  1 -> c  true -> d  _ -> e }
        gate { check script "c.sh" max_loops = 2 }
        env { A = "1" B = secret("B") C = passthrough }
        inputs = [params.p, steps.a.output,]
        output: map[list[int(min: 0)]] | null
        """
    )
    mapped, route, gate, env, inputs, output = items
    assert isinstance(mapped, ast.MapBlock) and mapped.over.text == "steps.a.output.files[0].names"
    assert isinstance(route, ast.RouteBlock)
    assert [c.match.value if c.match else "_" for c in route.cases] == ["x", 1, True, "_"]
    assert [c.target.text for c in route.cases] == ["b", "c", "d", "e"]
    assert isinstance(gate, ast.Gate) and isinstance(gate.items[0], ast.GateCheck)
    assert isinstance(env, ast.Env) and [(e.name.text, e.kind, e.value) for e in env.entries] == [
        ("A", "literal", "1"),
        ("B", "secret", "B"),
        ("C", "passthrough", None),
    ]
    assert isinstance(inputs, ast.Inputs) and [r.text for r in inputs.refs] == ["params.p", "steps.a.output"]
    assert isinstance(output, ast.OutputType) and isinstance(output.type, ast.UnionType)


def test_keywords_are_contextual() -> None:
    workflow = parse_ok(
        'workflow "w" {\n step map { shell "a" output: { output: int, map: string } }\n'
        ' step route { shell "b" inputs = [steps.map.output.output] }\n}\n'
    )
    assert [s.id.text for s in workflow.steps] == ["map", "route"]


def test_settings_values() -> None:
    (retry, timeout, on_error) = step_items(
        'retry = { max = 2, on = [exit, timeout], backoff = 1h30m }\ntimeout = 90s\non_error = continue\nshell "x"'
    )[:3]
    assert isinstance(retry, ast.Setting) and isinstance(retry.value, ast.ObjectValue)
    assert isinstance(timeout, ast.Setting) and isinstance(timeout.value, ast.Duration) and timeout.value.ms == 90_000
    backoff = retry.value.entries[2][1]
    assert isinstance(backoff, ast.Duration) and backoff.ms == 5_400_000
    assert isinstance(on_error, ast.Setting) and isinstance(on_error.value, ast.Word)


@pytest.mark.parametrize(
    ("text", "ms"), [("250ms", 250), ("90s", 90_000), ("10m", 600_000), ("2h", 7_200_000), ("1h30m5s", 5_405_000)]
)
def test_durations_lower_to_milliseconds(text: str, ms: int) -> None:
    (setting, _) = step_items(f'timeout = {text}\nshell "x"')
    assert isinstance(setting, ast.Setting) and isinstance(setting.value, ast.Duration)
    assert setting.value.ms == ms


def test_numbers() -> None:
    params = (
        parse_ok('workflow "w" { params { a: int = 1_000 b: number = -2.5 c: int = -9007199254740991 d: any = null } }')
        .sections[0]
        .params
    )
    assert [p.default.value for p in params if isinstance(p.default, ast.Literal)] == [1000, -2.5, -(2**53 - 1), None]


def test_text_blocks_dedent() -> None:
    assert dedent_block('"""\n    first\n      second\n    """') == "first\n  second"
    assert dedent_block('"""one line"""') == "one line"
    assert dedent_block('"""\n  keep \\n raw\n  """') == "keep \\n raw"
    (target,) = step_items('agent """\n      Do it.\n      Carefully.\n      """')
    assert isinstance(target, ast.Target) and target.text is not None
    assert target.text.value == "Do it.\nCarefully."


def test_param_description_and_types() -> None:
    (param,) = (
        parse_ok('workflow "w" { params { v: string(pattern: "^a$", min_length: 1) | "x" = "x" "The version" } }')
        .sections[0]
        .params
    )
    assert param.description is not None and param.description.value == "The version"
    assert isinstance(param.type, ast.UnionType)
    named = param.type.members[0]
    assert isinstance(named, ast.NamedType) and [r.name.text for r in named.refinements] == ["pattern", "min_length"]


# -- syntax errors ------------------------------------------------------------------------


def test_unclosed_step_names_the_step_and_points_at_end_of_file() -> None:
    [(code, line, column, message)] = errors('workflow "w" {\n  step build {\n    shell "make"\n')
    assert (code, line, column) == ("E100", 3, 17)
    assert message.startswith("unexpected end of file; expected ")
    assert message.endswith("`}` to close step `build` opened at 2:3")


def test_unexpected_token_says_what_was_found_in_words() -> None:
    [(code, line, column, message)] = errors('workflow "w" {\n  step a {\n    shell "x"\n    inputs = 3\n  }\n}\n')
    assert (code, line, column) == ("E100", 4, 14)
    assert message == "unexpected number `3`; expected `[`"
    assert "Token" not in message and "LSQB" not in message


def test_misspelt_keyword_gets_did_you_mean() -> None:
    report = Report("t.akm")
    parse('workflow "w" { step a { shel "x" } }', report)
    [diagnostic] = report.diagnostics
    assert diagnostic.help == "did you mean `shell`?"


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ('workflow "w" {\n  description = "abc\n}', ("E101", 2, 17)),
        ('workflow "w" {\n  description = """abc\n}', ("E101", 2, 17)),
        ('workflow "w" {\n  description = "a\\qb"\n}', ("E101", 2, 19)),
        ('workflow "w" { step a { shell "x" timeout = 10min } }', ("E102", 1, 45)),
        ('workflow "w" { params { a: int = 9007199254740992 } }', ("E102", 1, 34)),
        ('workflow "w" { params { a: int = 1__0 } }', ("E102", 1, 34)),
        ('workflow "w" { @ }', ("E100", 1, 16)),
        ("", ("E100", 1, 1)),
        ('workflow "w" { params { a: int = ' + "[" * 200 + "]" * 200 + " } }", ("E100", 1, 34 + 200 - 65)),
    ],
)
def test_lexical_and_syntax_errors(src: str, expected: tuple[str, int, int]) -> None:
    found = errors(src)
    assert found and found[0][:3] == expected


def test_one_syntax_error_per_file_no_cascade() -> None:
    found = errors('workflow "w" {\n step a { shell }\n step b { shell }\n step c { @@@ }\n')
    assert len(found) == 1 and found[0][0] == "E100"


def test_lexical_errors_do_not_stop_the_parse() -> None:
    found = errors('workflow "w" { step a { shell "x" timeout = 5d retry = 1__2 } }')
    assert [f[0] for f in found] == ["E102", "E102"]
