"""Keyword completion for `parallel` blocks and `fail_fast` (akmc.lsp.completion), from the text alone."""

from __future__ import annotations

from akmc.lsp.completion import block_at, completions


def _labels(text: str) -> list[str]:
    offset = text.index("|")
    return [item.label for item in completions(text.replace("|", ""), offset, None)]


def test_a_workflow_offers_a_parallel_block() -> None:
    assert "parallel" in _labels('workflow "w" {\n  |\n}\n')


def test_inside_a_block_its_settings_and_steps() -> None:
    text = 'workflow "w" {\n  parallel checks {\n    |\n  }\n}\n'
    assert block_at(text.replace("|", ""), text.index("|")) == ("parallel", "checks")
    assert _labels(text) == ["step", "concurrency", "fail_fast", "on_error"]


def test_fail_fast_takes_a_boolean_in_a_map_and_on_its_step() -> None:
    assert "fail_fast" in _labels('workflow "w" {\n  step s {\n    map params.xs {\n      |\n    }\n  }\n}\n')
    assert _labels('workflow "w" {\n  step s {\n    fail_fast = |\n  }\n}\n') == ["true", "false"]
