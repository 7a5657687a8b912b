"""`akmc explain CODE`: print the documentation page of a diagnostic code."""

from __future__ import annotations

import sys

from akmc import exitcodes
from akmc.diagnostics import CATALOG, did_you_mean
from akmc.resources import explanation


def run(code: str) -> int:
    wanted = code.strip().upper()
    if wanted not in CATALOG:
        hint = did_you_mean(wanted, set(CATALOG))
        print(f"akmc: error: unknown diagnostic code `{code}`" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return exitcodes.USAGE
    sys.stdout.write(explanation(wanted))
    return exitcodes.OK
