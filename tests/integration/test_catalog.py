"""The catalog, the documentation pages and the examples in them stay in step."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from akmc.diagnostics import CATALOG, ERROR, WARNING
from akmc.messages import REGISTRY
from helpers import REPO, Checker

PAGES = REPO / "docs" / "diagnostics"
CODE_PAGES = sorted(p for p in PAGES.glob("*.md") if p.name != "index.md")  # index.md lists them
EXAMPLE = re.compile(r"```akm\n(.*?)```", re.S)
FILE_EXAMPLE = re.compile(r"```akm file=(\S+)\n(.*?)```", re.S)  # a multi-file example (tests/e2e/test_cli_compose.py)


def test_every_code_has_a_page_and_every_page_a_code() -> None:
    assert {p.stem for p in CODE_PAGES} == set(CATALOG)


def test_every_code_has_its_wording_in_the_registry_and_every_wording_a_code() -> None:
    """The message registry and the catalog name the same codes: no code without words, no words
    under a code that is not documented."""
    assert {t.code for t in REGISTRY} == set(CATALOG) == {p.stem for p in CODE_PAGES}


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
    """Each page's example is the golden case that tests/integration/test_golden.py checks produces exactly that code."""
    match = EXAMPLE.search((PAGES / f"{code}.md").read_text())
    case = REPO / "golden" / "errors" / f"{code}.akm"
    if match is None:
        page = (PAGES / f"{code}.md").read_text()
        assert "needs more than one file" in page or FILE_EXAMPLE.search(page) or "cannot show the bytes" in page
        return
    assert case.read_text() == match.group(1)


CASE_EXAMPLE = re.compile(r"```akm case=(\S+)\n(.*?)```", re.S)
CASES = sorted((p.stem, name) for p in CODE_PAGES for name, _ in CASE_EXAMPLE.findall(p.read_text()))


def test_every_situation_case_is_on_its_page() -> None:
    """Each golden case named `CODE-situation` is shown on the page of CODE."""
    situations = {p.stem for p in (REPO / "golden" / "errors").glob("*-*.akm")}
    assert situations == {name for _, name in CASES}
    assert all(name.split("-")[0] == code for code, name in CASES)


@pytest.mark.parametrize(("code", "name"), CASES, ids=[n for _, n in CASES])
def test_situation_example_is_its_golden_case(code: str, name: str) -> None:
    shown = dict(CASE_EXAMPLE.findall((PAGES / f"{code}.md").read_text()))
    assert (REPO / "golden" / "errors" / f"{name}.akm").read_text() == shown[name]


def test_page_example_checks_in_a_fresh_workspace(tmp_path: Path) -> None:
    page = (PAGES / "E203.md").read_text()
    match = EXAMPLE.search(page)
    assert match is not None
    assert Checker(tmp_path)(match.group(1)) == ["E203@7"]


def test_language_page_example_compiles(tmp_path: Path) -> None:
    shutil.copytree(REPO / "golden" / "corpus", tmp_path / "ws")
    [example] = EXAMPLE.findall((REPO / "docs" / "language.md").read_text())
    assert Checker(tmp_path / "ws")(example, name="workflows/doc.akm") == []
