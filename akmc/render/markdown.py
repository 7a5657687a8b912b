"""Markdown for pull-request comments: a summary line first, details in `<details>` blocks, capped in size.

GitHub refuses comments over 65,536 characters; a document stays within `LIMIT` and, when it must
cut, ends with a note saying what was left out, never with an open block or fence."""

from __future__ import annotations

import html
import re

from akmc.render.characters import visible

LIMIT = 60_000


def escape(text: str) -> str:
    """Text safe in a Markdown paragraph: no HTML, no emphasis, code or link syntax."""
    return html.escape(re.sub(r"([\\`*_\[\]|#~])", r"\\\1", text), quote=False)


def fence(lines: list[str], info: str = "text") -> list[str]:
    """A fenced code block that no line of the content can close."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+|~+", line)), default=0)
    marker = "`" * max(3, longest + 1)
    return [marker + info, *lines, marker]


class Document:
    """Blocks of lines; `render` keeps the summary and as many whole lines of the blocks as fit."""

    def __init__(self, summary: str) -> None:
        self.summary = summary
        self.blocks: list[tuple[str, str, list[str]]] = []  # (summary, info, body lines)

    def details(self, summary: str, lines: list[str], *, info: str = "text", open_: bool = False) -> None:
        """A block; a line break or control character in the summary or a content line is spelled out,
        so neither can end the HTML block or start a line that closes the fence."""
        opening = "<details open>" if open_ else "<details>"
        body = [line.replace("\r", "⟨U+000D⟩").replace("\n", "⟨U+000A⟩") for line in lines]
        self.blocks.append((f"{opening}<summary>{html.escape(visible(summary), quote=False)}</summary>", info, body))

    def render(self, how_to_see_all: str) -> str:
        out = [self.summary, ""]
        size = len(self.summary) + 2
        budget = LIMIT - 400  # room for the closing lines and the note
        for index, (opening, info, lines) in enumerate(self.blocks):
            block = [opening, "", *fence(lines, info), "</details>", ""]
            cost = sum(len(line) + 1 for line in block)
            if size + cost <= budget:
                out += block
                size += cost
                continue
            fenced = fence(lines, info)
            kept: list[str] = []
            room = budget - size - len(opening) - len(fenced[0]) * 2 - 30
            for line in lines:
                if room - len(line) - 1 < 0:
                    break
                kept.append(line)
                room -= len(line) + 1
            left = len(self.blocks) - index - (1 if kept else 0)
            parts = []
            if kept:
                out += [opening, "", fenced[0], *kept, fenced[-1], "</details>", ""]
                parts.append(_count(len(lines) - len(kept), "more line") + " of the last block")
            if left:
                parts.append(_count(left, "more block" if kept else "block"))
            cut = " and ".join(parts)
            out.append(f"> **Cut to fit a comment:** {cut} left out; {escape(visible(how_to_see_all))}.")
            break
        return "\n".join(out).rstrip("\n") + "\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"
