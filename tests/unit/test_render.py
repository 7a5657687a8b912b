"""Rendering is a pure function of diagnostics and sources: text with carets, and JSON."""

from __future__ import annotations

import json
from typing import SupportsIndex

from hypothesis import given
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

from akmc.ast import Span
from akmc.diagnostics import Diagnostic, Related
from akmc.render import json as json_render
from akmc.render import text

SOURCE = 'workflow "w" {\n  step publish {\n    shell "x"\n\tinputs = [steps.reviw.output]\n  }\n}\n'
UNKNOWN = Diagnostic(
    "E203",
    "unknown step `reviw` in reference `steps.reviw.output`",
    "wf.akm",
    Span(4, 18, 4, 23, 60, 65),
    help="did you mean `review`?",
    related=(Related("wf.akm", Span(2, 3, 2, 7, 17, 21), "in step `publish`"),),
)
WARNING = Diagnostic("W700", "param `x` is declared but never referenced", "other.akm", Span(1, 1, 1, 2, 0, 1))


def test_text_report(snapshot: SnapshotAssertion) -> None:
    assert text.render([UNKNOWN, WARNING], {"wf.akm": SOURCE}, 3) == snapshot


def test_caret_keeps_tabs_so_it_lines_up() -> None:
    rendered = text.render_one(UNKNOWN, SOURCE)
    source_line, caret_line = rendered.splitlines()[2:4]
    assert source_line == "4 | \tinputs = [steps.reviw.output]"
    assert caret_line.startswith("  | \t" + " " * 16 + "^^^^^ help:")


def test_multi_line_span_underlines_to_end_of_line() -> None:
    diagnostic = Diagnostic("E206", "m", "wf.akm", Span(2, 3, 5, 4, 17, 70))
    assert text.render_one(diagnostic, SOURCE).splitlines()[3] == "  |   " + "^" * len("step publish {")


def test_summary_lines() -> None:
    assert text.summary([], 12) == "No problems found (12 files checked)."
    assert text.summary([UNKNOWN], 1) == "Found 1 error in 1 file (1 file checked)."
    assert text.summary([UNKNOWN, WARNING], 3) == "Found 1 error and 1 warning in 2 files (3 files checked)."


def test_quiet_omits_the_summary() -> None:
    assert text.render([], {}, 4, quiet=True) == ""


def test_json_shape(snapshot: SnapshotAssertion) -> None:
    document = json.loads(json_render.render([UNKNOWN, WARNING]))
    assert document == snapshot
    assert set(document[1]) == {"file", "line", "column", "endLine", "endColumn", "code", "severity", "message"}


class _CountingSource(str):
    splits = 0

    def split(self, sep: str | None = None, maxsplit: SupportsIndex = -1) -> list[str]:
        type(self).splits += 1
        return super().split(sep, maxsplit)


def test_text_render_splits_each_source_once() -> None:
    """Rendering is linear in the number of diagnostics: 30,000 suppression comments each with a W704
    used to split the whole file once per diagnostic."""
    source = _CountingSource(SOURCE)
    text.render([UNKNOWN] * 50, {UNKNOWN.file: source}, 1)
    assert _CountingSource.splits == 1


@given(
    source=st.text(alphabet="ab \t\r\n", max_size=60),
    lines=st.lists(st.integers(min_value=0, max_value=12), max_size=6),
)
def test_kept_lines_render_as_the_whole_text(source: str, lines: list[int]) -> None:
    # A checked file's record keeps only the lines its diagnostics show; the report must not change.
    found = [Diagnostic("W700", "m", "wf.akm", Span(n, 1, n, 2, 0, 1), help="h") for n in lines]
    kept = text.shown_lines(source, found)
    assert len(kept) <= len(set(lines))
    assert text.render(found, {"wf.akm": kept}, 1) == text.render(found, {"wf.akm": source}, 1)
