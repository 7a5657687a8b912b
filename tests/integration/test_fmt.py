"""`akmc fmt`: one canonical layout that changes no plan, no diagnostic and no comment.

The property runs over every shipped source and over generated ones, each first given a random
layout (random spaces, line breaks, blank lines and comments between its tokens): the formatted
file parses, formats to itself, keeps every comment, and checks to the same diagnostics (codes at
the same tokens) and the same plan hash as the file it came from."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion
from test_check_compiles import CHILD, _shipped, _workflow

from akmc.compiler import Session
from akmc.formatter import Formatted, SyntaxProblem, format_source, tokens
from helpers import REPO
from profiles import examples

WHOLE_SNIPPET = re.compile(r"```akm\n(.*?)```", re.S)
FRAGMENT = re.compile(r"```akm fragment\n(.*?)```", re.S)


def _parses(source: Path | str) -> bool:
    """Every shipped source but the examples of syntax errors and unreadable files (E100–E103)."""
    try:
        format_source(source.read_text(encoding="utf-8") if isinstance(source, Path) else source)
    except (SyntaxProblem, UnicodeDecodeError):
        return False
    return True


SHIPPED = [p for p in _shipped() if _parses(p)]
DOCS = [
    m for page in sorted((REPO / "docs").rglob("*.md")) for m in WHOLE_SNIPPET.findall(page.read_text()) if _parses(m)
]
FRAGMENTS = [m for page in sorted((REPO / "docs").rglob("*.md")) for m in FRAGMENT.findall(page.read_text())]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_shipped_source_is_formatted(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert format_source(text).text == text


@pytest.mark.parametrize("index", range(len(DOCS)))
def test_every_docs_snippet_is_formatted(index: int) -> None:
    assert format_source(DOCS[index]).text == DOCS[index]


@pytest.mark.parametrize("index", range(len(FRAGMENTS)))
def test_every_docs_fragment_is_formatted(index: int) -> None:
    """A fragment (a step, say) is formatted as it stands inside a workflow, one level in."""
    body = "".join("  " + line if line else line for line in FRAGMENTS[index].splitlines(keepends=True))
    wrapped = 'workflow "w" {\n' + body + "}\n"
    assert format_source(wrapped).text == wrapped


# -- the property ------------------------------------------------------------------------------------

GAPS = st.sampled_from([" ", "  ", "\n", "\n\n", "\n\n\n", "\t", " \n    ", "\n  \n"])
COMMENTS = st.sampled_from(["# note", "#", "# akmc: ignore[E207]", "# akmc: ignore[W700, E203]", "# ünïcode ✓"])


@st.composite
def relaid(draw: st.DrawFn, text: str) -> str:
    """`text` with a random layout: each gap between two tokens becomes random white space, keeps
    its comments (each still ending its line) and may gain new ones."""
    found_tokens = tokens(text)
    out = []
    previous = 0
    for token in [*found_tokens, None]:
        end = token.start_pos if token is not None else len(text)
        comments = re.findall(r"#[^\n]*", text[previous:end])
        if draw(st.integers(0, 9)) == 0:
            comments.insert(draw(st.integers(0, len(comments))), draw(COMMENTS))
        gap = draw(GAPS) if previous else ""
        for comment in comments:
            gap += comment + "\n" + draw(GAPS).lstrip("\n")
        out.append(gap)
        if token is not None:
            out.append(str(token))
            assert token.end_pos is not None  # the lexer places every token
            previous = token.end_pos
    return "".join(out) + "\n"


def _check(root: Path, name: str) -> tuple[list[tuple[str, int]], str | None]:
    """(code, offset) of each diagnostic, and the plan hash (None without a plan)."""
    session = Session(root)
    result = session.check(root / name)
    found = sorted((d.code, d.span.start) for d in result.report.diagnostics)
    return found, (result.child.plan_hash if result.child is not None and result.plan is not None else None)


def _comments(text: str) -> list[str]:
    found_tokens = tokens(text)
    found, previous = [], 0
    for token in [*found_tokens, None]:
        end = token.start_pos if token is not None else len(text)
        found += [c.rstrip() for c in re.findall(r"#[^\n]*", text[previous:end])]
        if token is not None:
            assert token.end_pos is not None  # the lexer places every token
            previous = token.end_pos
    return sorted(found)


def _holds(root: Path, name: str, text: str) -> Formatted:
    (root / name).write_text(text, encoding="utf-8")
    before, plan_before = _check(root, name)
    formatted = format_source(text)
    assert format_source(formatted.text).text == formatted.text, "not idempotent"
    assert _comments(formatted.text) == _comments(text), "a comment was lost or changed"
    (root / name).write_text(formatted.text, encoding="utf-8")
    after, plan_after = _check(root, name)
    assert plan_after == plan_before
    assert after == sorted((code, formatted.offset(start)) for code, start in before)
    return formatted


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every golden case and the examples, copied once (children and scripts resolve)."""
    root = tmp_path_factory.mktemp("cases")
    shutil.copytree(REPO / "golden", root / "golden")
    shutil.copytree(REPO / "examples", root / "examples")
    (root / "generated").mkdir()
    (root / "generated" / "akm.toml").write_text("")
    (root / "generated" / "child.akm").write_text(CHILD)
    return root


def _workspace(copy: Path, path: Path) -> tuple[Path, str]:
    relative = path.relative_to(REPO)
    root = next((p for p in (copy / relative).parents if (p / "akm.toml").exists()), (copy / relative).parent)
    return root, (copy / relative).relative_to(root).as_posix()


@pytest.mark.slow
@settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_formatting_a_shipped_source_in_any_layout_changes_nothing_that_matters(
    cases: Path, data: st.DataObject
) -> None:
    path = data.draw(st.sampled_from(SHIPPED))
    root, name = _workspace(cases, path)
    original = path.read_text(encoding="utf-8")
    try:
        _holds(root, name, data.draw(relaid(original)))
    finally:
        (root / name).write_text(original, encoding="utf-8")


@pytest.mark.slow
@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_formatting_a_generated_workflow_changes_nothing_that_matters(cases: Path, data: st.DataObject) -> None:
    source = data.draw(_workflow())
    assume(_parses(source))  # the generator also writes syntax errors, which fmt refuses
    _holds(cases / "generated", "wf.akm", data.draw(relaid(source)))


# -- the canonical layout, by example -------------------------------------------------------------------

MESSY = (REPO / "tests" / "data" / "fmt" / "messy.akm").read_text(encoding="utf-8")


def test_a_messy_file_formats_to_the_snapshot(snapshot: SnapshotAssertion) -> None:
    assert format_source(MESSY).text == snapshot


@pytest.mark.parametrize("name", ["corpus/workflows/everything.akm", "language-example/workflows/release.akm"])
def test_a_golden_file_written_one_token_a_line_formats_to_the_snapshot(name: str, snapshot: SnapshotAssertion) -> None:
    """Every block and list then spans lines, so each gets one item a line: the layout the printer
    chooses where the source leaves every choice open."""
    source = (REPO / "golden" / name).read_text(encoding="utf-8")
    spread = "\n".join(str(token) for token in tokens(source)) + "\n"
    formatted = format_source(spread).text
    assert formatted == snapshot
    assert format_source(formatted).text == formatted


def test_the_messy_file_keeps_its_plan_and_diagnostics(cases: Path) -> None:
    _holds(cases / "generated", "messy.akm", MESSY)


def test_settings_take_their_fixed_order_with_their_comments() -> None:
    source = (
        'workflow "w" {\n  step a {\n    shell "x"\n    # why\n    on_error = continue\n    timeout = 1m # t\n  }\n}\n'
    )
    assert format_source(source).text == (
        'workflow "w" {\n  step a {\n    shell "x"\n    timeout = 1m # t\n    # why\n    on_error = continue\n  }\n}\n'
    )


def test_a_suppression_keeps_the_tokens_of_its_line() -> None:
    """`# akmc: ignore[…]` silences what starts on its line: the formatter never moves a token onto
    that line or off it, even where the layout would break the line."""
    source = 'workflow "w" {\n  step a { shell "x"  retry = 1 # akmc: ignore[E207]\n    timeout = 1m\n  }\n}\n'
    assert format_source(source).text == source
    plain = source.replace("# akmc: ignore[E207]", "# plain")
    assert format_source(plain).text == (
        'workflow "w" {\n  step a {\n    shell "x"\n    timeout = 1m\n    retry = 1 # plain\n  }\n}\n'
    )


def test_values_as_deep_as_the_checker_allows_are_formatted() -> None:
    source = 'workflow "w" { params { p: any = ' + "[" * 64 + "]" * 64 + " } }\n"
    assert format_source(source).text == source


def test_text_blocks_strings_and_numbers_stay_as_written() -> None:
    source = (
        'workflow "w" {\n description = """\n\t  odd  \n   indent   \n"""\n  params { n: int = 1_000  '
        'd: number = 1.50e3  s: string = "\\u00e9\\/"  }\n limits { timeout = 1h30m }\n}\n'
    )
    formatted = format_source(source).text
    assert '"""\n\t  odd  \n   indent   \n"""' in formatted
    assert "1_000" in formatted and "1.50e3" in formatted and '"\\u00e9\\/"' in formatted and "1h30m" in formatted


@pytest.mark.parametrize(
    "source",
    [
        'workflow "w" {',
        'workflow "w" { step a { shell "x }\n}',
        'workflow "w" {}\n}',
        "",
        "\x00",
        'workflow "w" { params { p: any = ' + "[" * 65 + "]" * 65 + " } }",  # deeper than the checker allows
        'workflow "w" { params { p: any = ' + "[" * 5000 + "]" * 5000 + " } }",
    ],
)
def test_a_syntax_error_is_refused(source: str) -> None:
    with pytest.raises(SyntaxProblem) as raised:
        format_source(source, "wf.akm")
    assert raised.value.diagnostic.code in ("E100", "E101")
