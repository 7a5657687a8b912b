"""The documentation reads as one text: no page carries what a bad merge or an unfinished edit leaves
behind (a heading twice, a heading with nothing under it, a table cut in two or with a row twice, a
paragraph that stops mid-sentence, a link to a page or heading that is not there)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import REPO

PAGES = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").rglob("*.md")])
HEADING = re.compile(r"^(#{1,6}) +(.*?) *#*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
LIST_ITEM = re.compile(r"^ *([-*+]|\d+[.)]) ")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A paragraph ends as a sentence does, or introduces what follows (":"), or is a closing quote,
# bracket or code span.
# Words that continue a sentence begun before: a paragraph may start with one only after the code
# block it continues.
CONTINUATION = re.compile(r"(and|or|but|which|that|then|so|with|of)\b")
SENTENCE_END = (".", ":", "!", "?", ")", "`", '"', "*", "]", ">")


@dataclass
class Block:
    kind: str  # "heading", "table", "paragraph", "list", "code", "html"
    line: int  # 1-based line of the block's first line
    lines: list[str]
    level: int = 0


def blocks(text: str) -> Iterator[Block]:
    """The page's top-level blocks, in order (enough Markdown for the checks below)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        start = i
        if fence := FENCE.match(line):
            marker = fence.group(1)
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(marker):
                i += 1
            yield Block("code", start + 1, lines[start : i + 1])
            i += 1
            continue
        heading = HEADING.match(line)
        if heading:
            yield Block("heading", start + 1, [heading.group(2)], len(heading.group(1)))
            i += 1
            continue
        kind = "table" if _row(line) else "list" if LIST_ITEM.match(line) else "paragraph"
        kind = "html" if line.startswith("<") else kind
        i += 1
        while i < len(lines) and lines[i].strip() and not HEADING.match(lines[i]) and not FENCE.match(lines[i]):
            if kind == "table" and not _row(lines[i]):
                break
            if kind == "paragraph" and (_row(lines[i]) or LIST_ITEM.match(lines[i])):
                break
            i += 1
        yield Block(kind, start + 1, lines[start:i])


def _row(line: str) -> bool:
    return line.lstrip().startswith("|")


def cells(row: str) -> list[str]:
    """A table row's cells: `|` inside a code span or escaped as `\\|` separates nothing."""
    out, cell, in_code = [], "", False
    body = row.strip()[1:-1] if row.strip().endswith("|") else row.strip()[1:]
    j = 0
    while j < len(body):
        char = body[j]
        if char == "\\" and j + 1 < len(body):
            cell += body[j : j + 2]
            j += 2
            continue
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            out.append(cell.strip())
            cell = ""
        else:
            cell += char
        j += 1
    return [*out, cell.strip()]


def slug(heading: str) -> str:
    """The anchor GitHub and MkDocs give a heading (lower case, punctuation dropped, spaces as -)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def debris(page: Path) -> list[str]:
    found: list[str] = []
    parsed = list(blocks(page.read_text(encoding="utf-8")))
    found += _headings(parsed)
    found += _tables(parsed)
    found += _paragraphs(parsed)
    return found


def _headings(parsed: list[Block]) -> list[str]:
    found: list[str] = []
    seen: dict[tuple[str, ...], int] = {}  # a heading's path → the line it first appears on
    path: list[str] = []
    for index, block in enumerate(parsed):
        if block.kind != "heading":
            continue
        path = [*path[: block.level - 1], block.lines[0]]
        key = tuple(path)
        if key in seen:
            found.append(f"line {block.line}: heading {block.lines[0]!r} again (first at line {seen[key]})")
        seen.setdefault(key, block.line)
        following = parsed[index + 1] if index + 1 < len(parsed) else None
        if following is None or (following.kind == "heading" and following.level <= block.level):
            found.append(f"line {block.line}: heading {block.lines[0]!r} has nothing under it")
    return found


def _tables(parsed: list[Block]) -> list[str]:
    found = []
    for block in (b for b in parsed if b.kind == "table"):
        if len(block.lines) < 2 or not re.fullmatch(r"\|( *:?-+:? *\|)+", block.lines[1].strip()):
            found.append(f"line {block.line}: table rows without a header (a table cut in two?)")
            continue
        width = len(cells(block.lines[0]))
        rows = [cells(row) for row in block.lines[2:]]
        # A first column of literal names or numbers (`akm-run run`, 4) is the table's key.
        keyed = all(re.fullmatch(r"`[^`]+`|\d+", row[0]) for row in rows)
        keys: dict[str, int] = {}
        for offset, row_cells in enumerate(rows, start=2):
            if len(row_cells) != width:
                found.append(f"line {block.line + offset}: {len(row_cells)} cells in a table of {width} columns")
            if keyed and row_cells[0] in keys:
                found.append(
                    f"line {block.line + offset}: table row {row_cells[0]!r} again (line {keys[row_cells[0]]})"
                )
            keys.setdefault(row_cells[0], block.line + offset)
    return found


def _paragraphs(parsed: list[Block]) -> list[str]:
    found = []
    for index, block in enumerate(parsed):
        if block.kind != "paragraph":
            continue
        first, last = block.lines[0].strip(), block.lines[-1].strip()
        # A paragraph may lead straight into the code block it introduces.
        into_code = index + 1 < len(parsed) and parsed[index + 1].kind == "code"
        if not last.endswith(SENTENCE_END) and not into_code:
            found.append(f"line {block.line + len(block.lines) - 1}: paragraph stops mid-sentence: {last!r}")
        after_code = index > 0 and parsed[index - 1].kind == "code"
        if re.match(r"\[[^\]]*\]\([^)]*\)[;,]", first) or (CONTINUATION.match(first) and not after_code):
            found.append(f"line {block.line}: paragraph starts mid-sentence: {first!r}")
    return found


def anchors(page: Path) -> set[str]:
    return {slug(b.lines[0]) for b in blocks(page.read_text(encoding="utf-8")) if b.kind == "heading"}


def broken_links(page: Path) -> list[str]:
    found = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            if not linked.exists():
                found.append(f"line {number}: link to {file_part!r}, which does not exist")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                found.append(f"line {number}: link to #{anchor} in {linked.name}, which has no such heading")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_page_carries_no_merge_or_edit_debris(page: Path) -> None:
    assert debris(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_code_block_names_a_language_and_only_attributes_the_site_knows(page: Path) -> None:
    """docs_hooks.py turns `file=`, `case=`, `fragment`, `run` and `illustrative` into what the site shows; any
    other word after the language would make the site swallow the rest of the page."""
    infos = [b.lines[0].strip()[3:] for b in blocks(page.read_text(encoding="utf-8")) if b.kind == "code"]
    assert [i for i in infos if not re.fullmatch(r"\w*(?: (?:file=\S+|case=\S+|fragment|run|illustrative))?", i)] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_reaches_a_page_and_heading_that_exist(page: Path) -> None:
    assert broken_links(page) == []


def test_the_checks_find_each_kind_of_debris(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Commands\n\n## Commands\n\nText.\n\n"
        "| code | meaning |\n| --- | --- |\n| 4 | refused |\n| 4 | refused again |\n\n| 70 | internal |\n\n"
        "| a | b |\n| --- | --- |\n| only one cell |\n\n"
        "It ends in the middle of\n\n[a link](page.md); and the rest.\n\n"
        "See [there](missing.md) and [here](#nowhere).\n"
    )
    assert debris(page) == [
        "line 3: heading 'Commands' has nothing under it",
        "line 5: heading 'Commands' again (first at line 3)",
        "line 12: table row '4' again (line 11)",
        "line 14: table rows without a header (a table cut in two?)",
        "line 18: 1 cells in a table of 2 columns",
        "line 20: paragraph stops mid-sentence: 'It ends in the middle of'",
        "line 22: paragraph starts mid-sentence: '[a link](page.md); and the rest.'",
    ]
    assert broken_links(page) == [
        "line 24: link to 'missing.md', which does not exist",
        "line 24: link to #nowhere in page.md, which has no such heading",
    ]
