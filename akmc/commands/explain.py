"""`akmc explain [CODE]`: print the documentation page of a diagnostic code, or list every code."""

from __future__ import annotations

import sys

from akmc import exitcodes
from akmc.diagnostics import CATALOG, did_you_mean
from akmc.resources import explanation


def run(code: str | None) -> int:
    if code is None:
        return _list()
    wanted = code.strip().upper()
    if wanted not in CATALOG:
        hint = did_you_mean(wanted, set(CATALOG))
        print(f"akmc: error: unknown diagnostic code `{code}`" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return exitcodes.USAGE
    sys.stdout.write(explanation(wanted))
    return exitcodes.OK


def _list() -> int:
    """Every code with its severity and one-line summary, then how to read a page."""
    width = max(len(entry.severity) for entry in CATALOG.values())
    for code in sorted(CATALOG):
        entry = CATALOG[code]
        print(f"{code}  {entry.severity:<{width}}  {entry.summary}")
    print("\nRun `akmc explain CODE` for a code's page (what it means, an example, how to fix it).")
    return exitcodes.OK
