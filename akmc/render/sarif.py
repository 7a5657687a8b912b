"""`--format sarif`: a SARIF 2.1.0 log with one rule per diagnostic code and one result per diagnostic."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from akmc import __version__
from akmc.diagnostics import CATALOG, ERROR, Diagnostic
from akmc.resources import explanation
from akmc.spans import Span

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
_MEANING = re.compile(r"## What it means\n\n(.*?)\n\n##", re.S)


def _rules(docs_url: str | None) -> list[dict[str, Any]]:
    rules = []
    for code in sorted(CATALOG):
        entry = CATALOG[code]
        text = explanation(code)
        meaning = _MEANING.search(text)
        rules.append(
            {
                "id": code,
                "name": "".join(w.capitalize() for w in re.findall(r"[A-Za-z0-9]+", entry.summary)),
                "shortDescription": {"text": entry.summary},
                "fullDescription": {"text": " ".join((meaning.group(1) if meaning else entry.summary).split())},
                "help": {"text": text, "markdown": text},
                "defaultConfiguration": {"level": "error" if entry.severity == ERROR else "warning"},
            }
        )
        if docs_url is not None:
            rules[-1]["helpUri"] = docs_url.replace("{code}", code)
    return rules


def _region(span: Span) -> dict[str, int]:
    return {"startLine": span.line, "startColumn": span.column, "endLine": span.end_line, "endColumn": span.end_column}


def _location(file: str, span: Span) -> dict[str, Any]:
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": quote(file), "uriBaseId": "%SRCROOT%"},
            "region": _region(span),
        }
    }


def render(diagnostics: Sequence[Diagnostic], docs_url: str | None = None) -> str:
    """The log; rules link to `docs_url` (`[check] docs_url`, with `{code}`) only when one is configured:
    every rule carries its whole page as `help`, so a viewer needs no link and gets no made-up one."""
    codes = sorted(CATALOG)
    results = []
    for d in diagnostics:
        result: dict[str, Any] = {
            "ruleId": d.code,
            "ruleIndex": codes.index(d.code),
            "level": "error" if d.severity == ERROR else "warning",
            "message": {"text": d.message + (f"\nhelp: {d.help}" if d.help else "")},
            "locations": [_location(d.file, d.span)],
        }
        if d.related:
            result["relatedLocations"] = [
                {"id": i, "message": {"text": r.message}, **_location(r.file, r.span)} for i, r in enumerate(d.related)
            ]
        results.append(result)
    driver: dict[str, Any] = {"name": "akmc", "version": __version__, "rules": _rules(docs_url)}
    if docs_url is not None:
        driver["informationUri"] = docs_url[: docs_url.index("{code}")].rpartition("/")[0] + "/"
    log = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
