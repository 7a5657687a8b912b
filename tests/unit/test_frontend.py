"""The fast parse loop against Lark's own parser, the stored tables against the grammar, and
parses on several threads at once."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark import Lark, Token, Transformer_NonRecursive
from lark.exceptions import UnexpectedInput
from lark.grammar import Symbol

from akm_run import planformat
from akmc import ast, syntax
from akmc.diagnostics import Diagnostic, Report
from akmc.frontend import tables
from akmc.resources import data_path
from helpers import REPO
from profiles import examples

SOURCES = sorted(p for d in ("golden", "examples") for p in (REPO / d).rglob("*.akm"))
TEXTS = [p.read_bytes().decode("utf-8", errors="replace") for p in SOURCES]  # one golden case is not UTF-8
GRAMMAR = data_path("grammar", "akm.lark").read_text(encoding="utf-8")
_LEXED_COMMENTS: list[Token] = []
# Lark's parser exactly as the front end used it before the parse loop: the reference.
LARK = Lark(
    GRAMMAR,
    parser="lalr",
    lexer="contextual",
    propagate_positions=True,
    maybe_placeholders=True,
    lexer_callbacks={"COMMENT": _LEXED_COMMENTS.append},
)

Outcome = tuple[str, ast.Workflow | None, list[Diagnostic], list[tuple[str, ast.Span]]]


class _Walk(Transformer_NonRecursive[Token, Any]):
    """Calls the front end's rule methods over Lark's parse tree, bottom-up."""

    def __init__(self, builder: Any) -> None:
        super().__init__(visit_tokens=True)
        self.builder = builder

    def __default__(self, data: str, children: list[Any], meta: Any) -> Any:
        span = ast.Span(meta.line, meta.column, meta.end_line, meta.end_column, meta.start_pos, meta.end_pos)
        return getattr(self.builder, data)(span, children)

    def __default_token__(self, token: Token) -> Any:
        return (token.type, str(token), token.start_pos, token.end_pos)


def _span(token: Token) -> ast.Span:
    line, column, end_line, end_column = token.line, token.column, token.end_line, token.end_column
    start, end = token.start_pos, token.end_pos
    assert line is not None and column is not None and end_line is not None and end_column is not None
    assert start is not None and end is not None  # the lexer gives every token its place
    return ast.Span(line, column, end_line, end_column, start, end)


def reference(text: str) -> Outcome:
    """Parse with Lark's parser and tree, then build with the same rule methods."""
    report = Report("wf.akm")
    _LEXED_COMMENTS.clear()
    try:
        tree = LARK.parse(text)
    except UnexpectedInput:
        return ("rejected", None, [], [])
    try:
        workflow = _Walk(syntax._Builder(text, report)).transform(tree)
    except syntax._TooDeep:
        return ("too deep", None, [], [])
    return ("parsed", workflow, report.diagnostics, [(t.value, _span(t)) for t in _LEXED_COMMENTS])


def fast(text: str) -> Outcome:
    report = Report("wf.akm")
    parsed = syntax.parse_source(text, report)
    if parsed.workflow is not None:
        return ("parsed", parsed.workflow, report.diagnostics, parsed.comments)
    assert len(report.diagnostics) == 1
    outcome = "too deep" if "nest deeper" in report.diagnostics[0].message else "rejected"
    return (outcome, None, [], [])


def agree(text: str) -> None:
    assert fast(text) == reference(text)


@pytest.mark.parametrize("text", TEXTS, ids=[str(p.relative_to(REPO)) for p in SOURCES])
def test_every_golden_and_example_source_parses_as_lark_parses_it(text: str) -> None:
    agree(text)


# -- sources generated from the grammar itself -------------------------------------------------------

SAMPLES = {  # texts for the pattern terminals, edge cases included; keywords are names too
    "NAME": ["a", "x_1", "_", "map", "route", "output", "step", "item", "params", "true", "secret", "check", "file"],
    "STEP_ID": ["build", "b-2", "map", "_x", "route-1", "step"],
    "STRING": ['""', '"s"', '"a\\"b"', '"\\u00e9"', '"\\q"', '"\\ud800"', '"é ☃"', '"# not a comment"'],
    "TEXT_BLOCK": ['"""x"""', '"""\n  a\n    b\n  """', '""""""'],
    "INT": ["0", "7", "-3", "1_000", "9007199254740992", "1__0", "9" * 45],
    "DECIMAL": ["1.5", "-0.25e3", "1_0.0_1", "1.", "2.5E+10"],
    "DURATION": ["5m", "1h30m", "90s", "10ms", "3x", "1_0s", "9" * 41 + "s"],
}
SEPARATORS = [" ", " ", "\n", "", "\t", "  # note\n", "\n\n  ", "\r\n", "#\n"]


def _shapes() -> tuple[dict[str, list[Sequence[Symbol]]], dict[str, str], dict[str, int]]:
    lark = tables.lark_parser()
    rules: dict[str, list[Sequence[Symbol]]] = {}
    for rule in lark.rules:
        rules.setdefault(rule.origin.name, []).append(rule.expansion)
    literal = {t.name: t.pattern.value for t in lark.terminals if t.pattern.type == "str"}
    height: dict[str, int] = {}  # the fewest levels that finish each rule
    for _ in range(len(rules)):
        for name, expansions in rules.items():
            for expansion in expansions:
                below = [s.name for s in expansion if not s.is_term]
                if all(b in height for b in below):
                    height[name] = min(height.get(name, 10**6), 1 + max([0, *(height[b] for b in below)]))
    return rules, literal, height


RULES, LITERAL, HEIGHT = _shapes()


def generate(rng: random.Random, budget: int = 12) -> str:
    """A random sentence of the grammar (expanded with a depth budget), tokens joined by random
    whitespace and comments: mostly valid sources, and invalid ones where a separator is empty."""
    out: list[str] = []
    stack: list[tuple[Symbol, int]] = [(tables.lark_parser().rules[0].origin, 0)]
    while stack:
        symbol, depth = stack.pop()
        if symbol.is_term:
            out.append(LITERAL.get(symbol.name) or rng.choice(SAMPLES[symbol.name]))
            out.append(rng.choice(SEPARATORS))
            continue
        options = RULES[symbol.name]
        if depth >= budget:  # finish: take the expansions that close soonest
            low = min(max([0] + [HEIGHT[s.name] for s in e if not s.is_term]) for e in options)
            options = [e for e in options if max([0] + [HEIGHT[s.name] for s in e if not s.is_term]) == low]
        elif rng.random() < 0.5:  # lean towards longer expansions (more items, more steps)
            options = [max(options, key=len)]
        stack.extend((s, depth + 1) for s in reversed(rng.choice(options)))
    return "".join(out)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(2, 14))
def test_generated_sources_parse_as_lark_parses_them(rng: random.Random, budget: int) -> None:
    agree(generate(rng, budget))


PIECES = [
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '"',
    '"""',
    "=",
    "->",
    ":",
    ",",
    ".",
    "|",
    "?",
    "_",
    "#",
    "\n",
    " ",
    "step",
    "map",
    "route",
    "gate",
    "env",
    "uses",
    "output",
    "item",
    "1_",
    "5m",
    "-",
    "9" * 20,
    "é",
]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.randoms(use_true_random=False),
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, 12), st.sampled_from(PIECES)), min_size=1, max_size=5),
)
def test_mutated_sources_parse_as_lark_parses_them(rng: random.Random, edits: list[tuple[float, int, str]]) -> None:
    text = generate(rng) if rng.random() < 0.5 else rng.choice(TEXTS)
    for where, cut, insert in edits:
        at = int(where * len(text))
        text = text[:at] + insert + text[at + cut :]
    agree(text)


def test_deep_nesting_is_reported_as_before() -> None:
    deep = 'workflow "w" { params { p: list[string] = ' + "[" * 70 + "]" * 70 + " } }"
    assert fast(deep)[0] == reference(deep)[0] == "too deep"
    broken_after = deep[:-1] + "step"  # a syntax error after the nesting still wins
    assert fast(broken_after)[0] == reference(broken_after)[0] == "rejected"


# -- the stored tables ----------------------------------------------------------------------------


def test_the_stored_tables_are_the_ones_the_grammar_defines() -> None:
    stored = json.loads(data_path("grammar", tables.STORED).read_text(encoding="utf-8"))
    assert stored == json.loads(json.dumps(tables.derive())), (
        "run `python -m akmc.frontend.tables` after editing the grammar"
    )


@pytest.mark.parametrize("seed", ["1", "2"])
def test_a_cold_process_derives_the_stored_tables(tmp_path: Path, seed: str) -> None:
    """Lark numbers LALR states differently in each process unless its disk cache is warm; the
    derived tables must not depend on that (a fresh machine has no cache)."""
    code = "import json, sys; from akmc.frontend import tables; json.dump(tables.derive(), sys.stdout)"
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONHASHSEED": seed}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == json.loads(data_path("grammar", tables.STORED).read_text(encoding="utf-8"))


def test_tables_are_derived_again_when_the_grammar_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    derived: list[bool] = []
    real = tables.derive

    def derive() -> dict[str, Any]:
        derived.append(True)
        return real()

    monkeypatch.setattr(tables, "grammar_hash", lambda: "an edited grammar")
    monkeypatch.setattr(tables, "derive", derive)
    tables.tables.cache_clear()
    try:
        assert tables.tables().start == real()["start"]
        assert derived == [True]
    finally:
        tables.tables.cache_clear()


def test_the_grammar_names_what_the_plan_format_names() -> None:
    terminals = {t.name: t.pattern.value for t in tables.lark_parser().terminals}
    assert terminals["NAME"] == planformat.NAME_PATTERN
    assert terminals["STEP_ID"] == planformat.STEP_ID_PATTERN


# -- re-entrancy --------------------------------------------------------------------------------------


def test_two_threads_parse_different_sources_at_once() -> None:
    texts = TEXTS
    alone = [fast(t) for t in texts]
    rounds = 15
    barrier = threading.Barrier(2)
    failures: list[str] = []

    def work(order: list[int]) -> None:
        barrier.wait()
        for _ in range(rounds):
            for i in order:
                if fast(texts[i]) != alone[i]:
                    failures.append(str(SOURCES[i]))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        forward = list(range(len(texts)))
        threads = [threading.Thread(target=work, args=(o,)) for o in (forward, forward[::-1])]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
