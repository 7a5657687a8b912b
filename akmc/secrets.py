"""Credential detection (E600): known token shapes plus a high-entropy rule, for every literal a plan
carries (lowering searches env literals and texts; `check_values` param defaults and `uses` bindings)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from akmc import ast, messages

if TYPE_CHECKING:
    from akmc.diagnostics import Report
    from akmc.resolve import Model

# (description, pattern) — searched anywhere in the literal.
KNOWN = [
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("a Slack token", re.compile(r"\bxox[bpars]-[A-Za-z0-9-]{10,}")),
    ("an API key (`sk-…`)", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}")),
    ("a private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")),
]
# The high-entropy rule: a whitespace-free run of at least 32 characters from the
# base64 alphabet that mixes lower case, upper case and digits, with a Shannon
# entropy of at least 4.3 bits per character. Hex digests (commit ids, sha256)
# have no upper case and never match; neither do words, paths or URLs with spaces
# or few distinct characters.
TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{32,}")
ENTROPY_BITS = 4.3


def entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_like_credential(value: str) -> str | None:
    """What the literal looks like ("a GitHub token" …), or None when it looks harmless."""
    for description, pattern in KNOWN:
        if pattern.search(value):
            return description
    for token in TOKEN.findall(value):
        classes = sum(bool(re.search(c, token)) for c in (r"[a-z]", r"[A-Z]", r"[0-9]"))
        if classes == 3 and entropy(token) >= ENTROPY_BITS:
            return "a high-entropy string"
    return None


def check_values(model: Model, report: Report) -> None:
    """E600 for a string in a param default or a `uses` binding literal: both are copied into the plan."""
    for name, param in model.params.items():
        if param.default is not None:
            _values(param.default, f"the default of param `{name}`", report)
    for sm in model.steps:
        if sm.target is not None and sm.target.kind == "uses":
            for binding in sm.target.bindings or []:
                if not isinstance(binding.value, ast.Reference):
                    _values(binding.value, f"binding `{binding.name.text}`", report)


def _values(value: ast.Value, what: str, report: Report) -> None:
    for literal in _strings(value):
        found = looks_like_credential(str(literal.value))
        if found:
            report.add(messages.credential_in_text(what=what, found=found), literal.span)


def _strings(value: ast.Value) -> Iterator[ast.Literal]:
    """The string literals in a value, however deeply nested in lists and objects, in source order."""
    stack: list[ast.Value] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Literal) and isinstance(node.value, str):
            yield node
        elif isinstance(node, ast.ListValue):
            stack.extend(reversed(node.items))
        elif isinstance(node, ast.ObjectValue):
            stack.extend(v for _, v in reversed(node.entries))
