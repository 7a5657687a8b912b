"""Which characters review output spells out as `⟨U+XXXX⟩`: every one a reader could miss or mistake.

The rule, from the Unicode standard: a code point is spelled out when its general category shows
nothing by itself (controls Cc, format characters Cf, surrogates Cs, private use Co, unassigned Cn,
separators Zs Zl Zp), when it is Default_Ignorable_Code_Point (rendered as nothing when a font lacks
it, whatever its category: the combining grapheme joiner, variation selectors, Hangul fillers, tag
characters), or when it is a letter or symbol drawn without ink (`BLANK`). A plain space and a tab
inside a line show as themselves; at the end of a line they are spelled out too, as whitespace there
looks like none. `⟨` itself is spelled out, so the notation never reads two ways. Display only: a
plan's bytes never change."""

from __future__ import annotations

import unicodedata

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})

# Default_Ignorable_Code_Point, as listed in the Unicode Character Database file
# DerivedCoreProperties.txt (Unicode 15.0; UAX #44). Python's unicodedata has categories but not this
# property. Inclusive ranges; many are Cf or Cn and so hidden by category already.
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),  # SOFT HYPHEN
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # ARABIC LETTER MARK
    (0x115F, 0x1160),  # HANGUL CHOSEONG FILLER..HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ..AA
    (0x180B, 0x180F),  # MONGOLIAN FREE VARIATION SELECTORS and VOWEL SEPARATOR
    (0x200B, 0x200F),  # ZERO WIDTH SPACE..RIGHT-TO-LEFT MARK
    (0x202A, 0x202E),  # LEFT-TO-RIGHT EMBEDDING..RIGHT-TO-LEFT OVERRIDE
    (0x2060, 0x206F),  # WORD JOINER..NOMINAL DIGIT SHAPES
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xFE00, 0xFE0F),  # VARIATION SELECTOR-1..16
    (0xFEFF, 0xFEFF),  # ZERO WIDTH NO-BREAK SPACE
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # reserved
    (0x1BCA0, 0x1BCA3),  # SHORTHAND FORMAT LETTER OVERLAP..UP STEP
    (0x1D173, 0x1D17A),  # MUSICAL SYMBOL BEGIN BEAM..END PHRASE
    (0xE0000, 0xE0FFF),  # LANGUAGE TAG, TAG characters, VARIATION SELECTOR-17..256, reserved
)

# Assigned letters and symbols that draw nothing, though not Default_Ignorable: the Hangul fillers
# (also in the list above), BRAILLE PATTERN BLANK, MUSICAL SYMBOL NULL NOTEHEAD, KHITAN SMALL SCRIPT FILLER.
BLANK = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, 0x1D159, 0x16FE4})

_SPELLED = BLANK | {code for low, high in _DEFAULT_IGNORABLE for code in range(low, high + 1)} | {ord("⟨")}


def hides(char: str) -> bool:
    """Whether one character, shown as itself inside a line, could be missed or mistaken."""
    if char in " \t":
        return False
    return ord(char) in _SPELLED or unicodedata.category(char) in _HIDDEN_CATEGORIES


def spelled(char: str) -> str:
    return f"⟨U+{ord(char):04X}⟩"


class _Shown(dict[int, str]):
    """Code point → how it is shown, filled on first sight (up to `LIMIT` entries, so a text of every
    code point does not keep a million of them): `str.translate` then runs at C speed."""

    LIMIT = 1 << 16

    def __missing__(self, code: int) -> str:
        char = chr(code)
        shown = spelled(char) if hides(char) else char
        if len(self) < self.LIMIT:
            self[code] = shown
        return shown


_SHOWN = _Shown()
_TRAILING = {ord(" "): spelled(" "), ord("\t"): spelled("\t")}


def visible(line: str) -> str:
    """One line with every character a reader could miss spelled out as `⟨U+XXXX⟩`."""
    body = line.rstrip(" \t")
    return body.translate(_SHOWN) + line[len(body) :].translate(_TRAILING)
