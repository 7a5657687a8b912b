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


# Codes whose checks have landed; the examples of the others are exercised by the
# golden corpus once their stage lands.
CHECKED = {"E100", "E101", "E102"}


@pytest.mark.parametrize("code", sorted(CHECKED))
def test_page_example_triggers_its_code(code: str, tmp_path: Path) -> None:
    match = EXAMPLE.search((PAGES / f"{code}.md").read_text())
    assert match, f"{code} page has no akm example"
    assert code in {c.split("@")[0] for c in Checker(tmp_path)(match.group(1))}
