"""`akmc explain CODE`: print the documentation page of a diagnostic code."""

from __future__ import annotations

import sys

from akmc import exitcodes
from akmc.diagnostics import CATALOG, did_you_mean
from akmc.resources import data_path


def page(code: str) -> str:
    """The markdown documentation of a catalog code."""
    return data_path("docs", "diagnostics", f"{code}.md").read_text(encoding="utf-8")


def run(code: str) -> int:
    wanted = code.strip().upper()
    if wanted not in CATALOG:
        hint = did_you_mean(wanted, set(CATALOG))
        print(f"akmc: error: unknown diagnostic code `{code}`" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return exitcodes.USAGE
    sys.stdout.write(page(wanted))
    return exitcodes.OK
