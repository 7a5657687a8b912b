"""The language server's quick fixes on their own: where `# akmc: ignore[…]` goes, and when a fix
is not offered."""

from __future__ import annotations

from lsprotocol import types as lsp

from akmc.diagnostics import Diagnostic
from akmc.lsp.fixes import code_actions
from akmc.lsp.positions import Lines
from akmc.spans import Span

URI = "file:///w/wf.akm"


def _at(text: str, needle: str, code: str, help_text: str | None = None) -> Diagnostic:
    start = text.index(needle)
    line = text.count("\n", 0, start) + 1
    column = start - text.rfind("\n", 0, start)
    span = Span(line, column, line, column + len(needle), start, start + len(needle))
    return Diagnostic(code, "message", "wf.akm", span, help_text)


def _edits(text: str, diagnostic: Diagnostic) -> dict[str, list[lsp.TextEdit]]:
    actions = code_actions(URI, text, Lines(text), [diagnostic], diagnostic.span.start, diagnostic.span.end)
    found = {}
    for action in actions:
        assert action.edit is not None and action.edit.changes is not None
        found[action.title.split(" ")[0]] = list(action.edit.changes[URI])
    return found


def test_a_suppression_is_appended_to_the_line_or_joins_the_one_there() -> None:
    text = 'workflow "w" {\n  step a {\n    shell "x"   \n    timeout = 1h # akmc: ignore[E601]\n  }\n}\n'
    (edit,) = _edits(text, _at(text, "shell", "W700"))["Silence"]
    assert edit.new_text == " # akmc: ignore[W700]" and edit.range.start == lsp.Position(2, 13)  # before the spaces
    (joined,) = _edits(text, _at(text, "timeout", "E207"))["Silence"]
    assert joined.new_text == "# akmc: ignore[E601, E207]"
    assert "Silence" not in _edits(text, _at(text, "timeout", "E601"))  # already silenced there


def test_no_suppression_inside_a_text_block_or_for_a_syntax_error() -> None:
    text = 'workflow "w" {\n  step a {\n    agent """\n      prose\n      """\n  }\n}\n'
    assert "Silence" not in _edits(text, _at(text, '"""', "E206"))  # the line ends inside the text block
    assert "Silence" not in _edits(text, _at(text, "agent", "E100"))


def test_a_did_you_mean_replaces_the_closest_word_of_the_span() -> None:
    text = 'workflow "w" {\n  step review { shell "x" }\n  step b {\n    inputs = [steps.reviw.output]\n  }\n}\n'
    (edit,) = _edits(text, _at(text, "steps.reviw.output", "E203", "did you mean `review`?"))["Replace"]
    assert edit.new_text == "review" and text.splitlines()[3][edit.range.start.character :].startswith("reviw")


def test_a_stale_suppression_loses_what_silences_nothing() -> None:
    text = 'workflow "w" {\n  step a {\n    shell "make" # akmc: ignore[E203, W700]\n  }\n}\n'
    stale = Diagnostic(
        "W704", "`# akmc: ignore[E203]` silences nothing on line 3", "wf.akm", _at(text, "# akmc", "W704").span
    )
    (edit,) = _edits(text, stale)["Remove"]
    assert edit.new_text == "# akmc: ignore[W700]"
    everything = Diagnostic(
        "W704", "`# akmc: ignore[E203, W700]` silences nothing on line 3", "wf.akm", _at(text, "# akmc", "W704").span
    )
    (removed,) = _edits(text, everything)["Remove"]
    assert removed.new_text == "" and removed.range == lsp.Range(lsp.Position(2, 16), lsp.Position(2, 43))
