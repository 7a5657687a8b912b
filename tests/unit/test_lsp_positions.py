"""The language server's pure parts: position arithmetic (any text, any encoding) and the contexts
completion reads from text being typed, which often does not parse."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types as lsp

from akmc.lsp.completion import block_at
from akmc.lsp.positions import Lines

ENCODINGS = [lsp.PositionEncodingKind.Utf16, lsp.PositionEncodingKind.Utf8, lsp.PositionEncodingKind.Utf32]
TEXT = st.lists(st.sampled_from(["a", "é", "😀", "\n", "\r\n", "\r", " ", "\u2028", "\x0c"]), max_size=40).map("".join)


@given(text=TEXT, data=st.data())
def test_an_offset_survives_the_trip_through_a_position(text: str, data: st.DataObject) -> None:
    encoding = data.draw(st.sampled_from(ENCODINGS))
    lines = Lines(text, encoding)
    offset = data.draw(st.integers(0, len(text)))
    if offset > 0 and text.startswith("\n", offset) and text.startswith("\r", offset - 1):
        offset -= 1  # the middle of a \r\n is no position at all
    assert lines.offset(lines.position(offset)) == offset


@given(text=TEXT, line=st.integers(0, 100), character=st.integers(0, 100))
def test_any_client_position_lands_inside_the_text(text: str, line: int, character: int) -> None:
    for encoding in ENCODINGS:
        assert 0 <= Lines(text, encoding).offset(lsp.Position(line, character)) <= len(text)


def test_columns_count_the_negotiated_units() -> None:
    text = "a😀é\r\nx\u2028y"
    assert Lines(text).position(text.index("é")) == lsp.Position(0, 3)  # the emoji is two UTF-16 units
    assert Lines(text, lsp.PositionEncodingKind.Utf8).position(text.index("é")) == lsp.Position(0, 5)
    assert Lines(text).position(text.index("x")) == lsp.Position(1, 0)  # \r\n is one line break
    assert Lines(text).position(text.index("y")) == lsp.Position(1, 2)  # U+2028 is not one


def test_the_block_being_typed_in_is_found_outside_strings_and_comments() -> None:
    source = 'workflow "a { b" {\n  # { not a block\n  step build {\n    shell "}"\n    gate { '
    assert block_at(source, len(source)) == ("gate", "")
    assert block_at(source, source.index("shell")) == ("step", "build")
    assert block_at(source, source.index("# {")) == ("workflow", "")
    assert block_at(source, 3) == ("", "")
    text_block = 'workflow "w" {\n  step a {\n    agent """\n      { not a block\n      """\n    '
    assert block_at(text_block, len(text_block)) == ("step", "a")
    assert block_at('workflow "w" {\n  step c {\n    uses "w/child" { ', 46) == ("uses", "w/child")


def test_akmc_lsp_without_the_extra_says_how_to_install_it() -> None:
    script = "import sys; sys.modules['pygls'] = None; from akmc.commands.lsp import run; sys.exit(run())"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "pip install 'akmc[lsp]'" in run.stderr and "Traceback" not in run.stderr
