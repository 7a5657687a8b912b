"""`--format sarif`: a SARIF 2.1.0 log with one rule per diagnostic code and one result per diagnostic."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from akmc import DOCS_URL, __version__
from akmc.diagnostics import CATALOG, ERROR, Diagnostic
from akmc.spans import Span

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
_MEANING = re.compile(r"## What it means\n\n(.*?)\n\n##", re.S)


def _rules() -> list[dict[str, Any]]:
    from akmc.resources import explanation

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
                "helpUri": DOCS_URL.format(code=code),
                "defaultConfiguration": {"level": "error" if entry.severity == ERROR else "warning"},
            }
        )
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


def render(diagnostics: Sequence[Diagnostic]) -> str:
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
    log = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "akmc",
                        "version": __version__,
                        "informationUri": DOCS_URL.split("{")[0],
                        "rules": _rules(),
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
