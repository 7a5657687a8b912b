"""The catalog, the documentation pages and the examples in them stay in step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from akmc.diagnostics import CATALOG, ERROR, WARNING
from conftest import REPO, Checker

PAGES = REPO / "docs" / "diagnostics"
EXAMPLE = re.compile(r"```akm\n(.*?)```", re.S)


def test_every_code_has_a_page_and_every_page_a_code() -> None:
    assert {p.stem for p in PAGES.glob("*.md")} == set(CATALOG)


@pytest.mark.parametrize("code", sorted(CATALOG))
def test_page_structure(code: str) -> None:
    page = (PAGES / f"{code}.md").read_text()
    entry = CATALOG[code]
    assert page.startswith(f"# {code}: {entry.summary}\n")
    assert f"Severity: **{entry.severity}**" in page
    for heading in ("## What it means", "## Example", "## How to fix"):
        assert heading in page
    assert entry.severity == (WARNING if code.startswith("W") else ERROR)


@pytest.mark.parametrize("code", sorted(CATALOG))
def test_page_example_is_a_golden_error_case(code: str) -> None:
    """Each page's example is the golden case that tests/test_golden.py checks produces exactly that code."""
    match = EXAMPLE.search((PAGES / f"{code}.md").read_text())
    case = REPO / "golden" / "errors" / f"{code}.akm"
    if match is None:
        assert "needs more than one file" in (PAGES / f"{code}.md").read_text()
        return
    assert case.read_text() == match.group(1)


def test_page_example_checks_in_a_fresh_workspace(tmp_path: Path) -> None:
    page = (PAGES / "E203.md").read_text()
    match = EXAMPLE.search(page)
    assert match is not None
    assert Checker(tmp_path)(match.group(1)) == ["E203@7"]


def test_language_page_example_compiles(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(REPO / "golden" / "corpus", tmp_path / "ws")
    [example] = EXAMPLE.findall((REPO / "docs" / "language.md").read_text())
    assert Checker(tmp_path / "ws")(example, name="workflows/doc.akm") == []
