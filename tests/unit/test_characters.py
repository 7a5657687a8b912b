"""The one spelling of characters a reader could miss in review output (`akmc plan`, `akmc diff`):
every code point that renders invisibly is shown as `⟨U+XXXX⟩`, everything else is left alone.

The oracle is independent of the implementation: Unicode's own Default_Ignorable_Code_Point list
(an unchanged excerpt of DerivedCoreProperties.txt under tests/data/), Python's general categories,
and the blank-rendering characters the Unicode standard names as fillers or blanks."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from akmc.render.characters import visible
from helpers import REPO

DERIVED = REPO / "tests" / "data" / "DerivedCoreProperties-Default_Ignorable_Code_Point.txt"
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})
# letters and symbols with no ink: Hangul fillers, the blank Braille pattern, a null notehead, a filler
BLANK = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, 0x1D159, 0x16FE4})
KEPT = frozenset({0x20, 0x09})  # a space or a tab inside a line is seen as what it is


def _default_ignorable() -> frozenset[int]:
    found: set[int] = set()
    for line in DERIVED.read_text(encoding="utf-8").splitlines():
        match = re.match(r"([0-9A-F]{4,6})(?:\.\.([0-9A-F]{4,6}))?\s*; Default_Ignorable_Code_Point", line)
        if match:
            first = int(match.group(1), 16)
            found.update(range(first, int(match.group(2) or match.group(1), 16) + 1))
    assert len(found) == 4174  # the file's own "Total code points"
    return frozenset(found)


DEFAULT_IGNORABLE = _default_ignorable()
# drawn on purpose: random code points seldom land on those that no category gives away
RARE = sorted(c for c in DEFAULT_IGNORABLE | BLANK if unicodedata.category(chr(c)) not in HIDDEN_CATEGORIES)
CODE_POINTS = st.one_of(st.integers(min_value=0, max_value=0x10FFFF), st.sampled_from(RARE))
TEXTS = st.lists(st.one_of(st.characters(), st.sampled_from(RARE).map(chr))).map("".join)


def hides(code: int) -> bool:
    """Whether a code point, shown raw, could be missed or mistaken by a reader."""
    if code in KEPT:
        return False
    category = unicodedata.category(chr(code))
    return category in HIDDEN_CATEGORIES or code in DEFAULT_IGNORABLE or code in BLANK


def _spelled(code: int) -> str:
    return f"⟨U+{code:04X}⟩"


def _check(code: int) -> None:
    char = chr(code)
    expected = _spelled(code) if hides(code) or char == "⟨" else char
    assert visible(f"a{char}b") == f"a{expected}b", f"U+{code:04X}"


@given(CODE_POINTS)
def test_a_code_point_that_renders_invisibly_is_spelled_out(code: int) -> None:
    _check(code)


def test_every_code_point_is_spelled_out_exactly_when_it_hides() -> None:
    for code in range(0x110000):
        _check(code)


def test_the_reported_characters() -> None:
    for code in (0x034F, 0xFE0F, 0x3164, 0x115F, 0x2800, 0x1160, 0xFFA0, 0x00A0, 0x2028, 0xE0041, 0xE01EF):
        assert visible(f"prod{chr(code)}") == f"prod{_spelled(code)}"


@given(TEXTS)
def test_no_hidden_code_point_reaches_the_output_raw(text: str) -> None:
    shown = visible(text)
    assert not [c for c in shown if hides(ord(c))]
    body = re.sub(r"⟨U\+([0-9A-F]{4,6})⟩", lambda m: chr(int(m.group(1), 16)), shown)
    assert body == text  # and every character comes back


@given(st.text(st.characters(codec="utf-8").filter(lambda c: not hides(ord(c)) and c != "⟨")))
def test_visible_text_is_unchanged(text: str) -> None:
    if text.rstrip(" \t") == text:
        assert visible(text) == text
    else:  # trailing whitespace would look like none
        assert visible(text).startswith(text.rstrip(" \t")) and "⟨U+00" in visible(text)
