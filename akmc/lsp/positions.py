"""Offsets in a document's text ↔ protocol positions: lines end at `\n`, `\r\n` or `\r`, and a
column counts UTF-16 code units unless the client negotiated UTF-8 (or UTF-32)."""

from __future__ import annotations

import bisect
import re

from lsprotocol import types

_LINE_END = re.compile(r"\r\n|\r|\n")


def _units(text: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


class Lines:
    """Position arithmetic over one version of a document's text."""

    def __init__(self, text: str, encoding: str = types.PositionEncodingKind.Utf16) -> None:
        self.text = text
        self.encoding = encoding
        self.starts = [0] + [m.end() for m in _LINE_END.finditer(text)]

    def _line_end(self, line: int) -> int:
        """The offset where `line`'s text ends (before its line break)."""
        if line + 1 < len(self.starts):
            end = self.starts[line + 1]
            return end - (2 if self.text.startswith("\r\n", end - 2) else 1)
        return len(self.text)

    def position(self, offset: int) -> types.Position:
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        start = self.starts[line]
        return types.Position(line, _units(self.text[start:offset], self.encoding))

    def range(self, start: int, end: int) -> types.Range:
        return types.Range(self.position(start), self.position(max(start, end)))

    def offset(self, position: types.Position) -> int:
        """The offset of a client position; a column past the end of its line is the line's end."""
        if position.line >= len(self.starts):
            return len(self.text)
        start, end = self.starts[position.line], self._line_end(position.line)
        if self.encoding == types.PositionEncodingKind.Utf32:
            return min(start + position.character, end)
        counted, offset = 0, start
        while offset < end and counted < position.character:
            counted += _units(self.text[offset], self.encoding)
            offset += 1
        return offset

    def line_end(self, offset: int) -> int:
        """The end of the line that holds `offset`."""
        return self._line_end(bisect.bisect_right(self.starts, offset) - 1)
