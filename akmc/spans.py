"""Source positions: the one type diagnostics, the workspace and the syntax tree share.

A module of its own so that reporting cached results never imports the syntax tree. The value
types of the reporting path are NamedTuples: `dataclasses` (with `inspect`) would add about 15 ms
to every warm `akmc check`."""

from __future__ import annotations

from typing import NamedTuple


class Span(NamedTuple):
    """A source range. Lines and columns are 1-based; `end_column` is exclusive.

    `start` and `end` are 0-based character offsets into the decoded text.
    """

    line: int
    column: int
    end_line: int
    end_column: int
    start: int
    end: int


def keyword(span: Span, word: str) -> Span:
    """The span of the keyword `word` that starts `span` (where a diagnostic about a block points)."""
    return Span(span.line, span.column, span.line, span.column + len(word), span.start, span.start + len(word))
