"""`akmc sign PLAN… --key KEY`: an SSH signature (namespace `akm-plan`) over each plan file's exact bytes."""

from __future__ import annotations

import sys
from pathlib import Path

from akm_run.atomic import write_atomically
from akm_run.plan import PlanError, plan_hash, read_bytes, verify_file
from akm_run.signing import SigningUnavailable, sign
from akm_run.trust import signature_path
from akmc import exitcodes


def run(plans: list[Path], key: Path, signature: Path | None) -> int:
    """Sign each plan that verifies, writing PLAN.sig beside it (or `signature`, for one plan).
    A plan that does not verify is refused (exit 4) and left unsigned; a key or ssh-keygen problem
    stops everything (exit 2)."""
    if signature is not None and len(plans) != 1:
        print("akmc: --signature names the signature of one plan; sign several plans without it", file=sys.stderr)
        return exitcodes.USAGE
    code = exitcodes.OK
    for path in plans:
        try:
            data = read_bytes(path)
            plan = verify_file(data)
        except PlanError as error:
            print(f"akmc: refused {path}: {error}; not signed", file=sys.stderr)
            code = exitcodes.REFUSED
            continue
        try:
            armored = sign(data, key)
        except SigningUnavailable as error:
            print(f"akmc: {error}", file=sys.stderr)
            return exitcodes.USAGE
        target = signature_path(path, signature)
        write_atomically(target, armored)
        print(f"signed {path}: {plan_hash(plan)} -> {target}")
    return code
