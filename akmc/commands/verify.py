"""`akmc verify PLAN` and `akmc hash`: the runtime's verification, and plan hashes."""

from __future__ import annotations

import sys
from pathlib import Path

from akm_run.plan import PlanError, plan_hash
from akmc import exitcodes
from akmc.driver import load_plan


def run(path: Path, signers: Path | None = None, signature: Path | None = None) -> int:
    """Verify a plan file as `akm-run verify` does; with `signers`, its signature too."""
    # late: signing and trust (with shutil, tempfile, base64: about 8 ms) are not for `akmc hash`
    from akm_run.signing import SignatureRefused, SigningUnavailable
    from akm_run.trust import admit

    if signature is not None and signers is None:
        print("akmc: --signature needs --allowed-signers", file=sys.stderr)
        return exitcodes.USAGE
    try:
        admitted = admit(path, signers=signers, signature=signature)
    except (PlanError, SignatureRefused) as error:
        print(f"akmc: refused {path}: {error}", file=sys.stderr)
        return exitcodes.REFUSED
    except SigningUnavailable as error:
        print(f"akmc: cannot check the signature of {path}: {error}", file=sys.stderr)
        return exitcodes.USAGE
    print(admitted.summary(path))
    return exitcodes.OK


def hash_of(path: Path, root: Path | None) -> int:
    """Print the plan hash of a source (compiled) or of a plan file (verified)."""
    plan, code = load_plan(path, root)
    if plan is None:
        return code
    print(plan_hash(plan))
    return exitcodes.OK
