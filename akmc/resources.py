"""Files shipped with akmc: inside the installed package, or at the source tree's root."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def data_path(*parts: str) -> Path:
    """`grammar/akm.lark` → the installed copy (akmc/grammar/…) or the checkout's (grammar/…)."""
    for base in (_HERE, _HERE.parent):
        candidate = base.joinpath(*parts)
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"{'/'.join(parts)} is missing from this installation")


def explanation(code: str) -> str:
    """The documentation page of a diagnostic code (markdown), as `akmc explain` prints it."""
    return data_path("docs", "diagnostics", f"{code}.md").read_text(encoding="utf-8")
