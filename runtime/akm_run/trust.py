"""What may run: a plan file admitted by verification and, when signatures are required, by an
allowed signer; and a stored run re-checked before it is driven, approved or resumed again.

`recheck` needs only two reads from a store (`run(id)` and `signature(id)`), so every store
implementation, and every host that starts or recovers a run, calls this same function."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from akm_run import features, signing, wording
from akm_run.plan import MAX_DEPTH, PlanError, loads_strict, plan_hash, read_bytes, verify_file
from akm_run.signing import MAX_SIGNATURE_BYTES, MAX_SIGNERS_BYTES, SignatureRefused, Signer, SigningUnavailable


@dataclass(frozen=True, slots=True)
class Signature:
    """A verified signature as a run records it: the signed file's bytes, the signature, who signed,
    and the allowed signers file it was checked against (re-drives read that file again)."""

    plan_file: bytes
    signature: bytes
    signer: Signer
    allowed_signers: str


@dataclass(frozen=True, slots=True)
class Admitted:
    plan: dict[str, Any]
    signature: Signature | None

    def summary(self, path: Path) -> str:
        """The line `verify` prints: the plan hash and, when signed, who signed it."""
        signed = self.signature
        if signed is None:
            return wording.verified(path=path, plan_hash=plan_hash(self.plan))
        signer = signed.signer
        return wording.verified_signed(
            path=path, plan_hash=plan_hash(self.plan), principal=signer.principal, fingerprint=signer.fingerprint
        )


class RunSource(Protocol):
    """The reads `recheck` needs from a store."""

    def run(self, run_id: str) -> Any: ...

    def signature(self, run_id: str) -> Signature | None: ...


def allowed_signers(given: Path | None) -> Path | None:
    """`--allowed-signers`, else $AKM_RUN_ALLOWED_SIGNERS, else None (signatures not required)."""
    if given is not None:
        return given
    value = os.environ.get(signing.SIGNERS_VARIABLE)
    return Path(value) if value else None


def signature_path(plan_path: Path, given: Path | None) -> Path:
    return given if given is not None else plan_path.with_name(plan_path.name + ".sig")


def _signers(path: Path) -> bytes:
    try:
        return signing.read_limited(path, MAX_SIGNERS_BYTES)
    except (OSError, ValueError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise SigningUnavailable(wording.unreadable_signers(path=path, why=why)) from None


def _signature(path: Path) -> bytes:
    try:
        return signing.read_limited(path, MAX_SIGNATURE_BYTES)
    except FileNotFoundError:
        raise SignatureRefused("unsigned", wording.no_signature(path=path)) from None
    except (OSError, ValueError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise SignatureRefused("bad_signature", wording.unreadable_signature(path=path, why=why)) from None


def admit(
    path: Path, expect_hash: str | None = None, signers: Path | None = None, signature: Path | None = None
) -> Admitted:
    """Read a plan file once and verify those bytes; with `signers`, also require a valid signature
    over the same bytes by a signer that file allows. Raises PlanError, SignatureRefused or
    SigningUnavailable; nothing is written."""
    data = read_bytes(path)
    plan = verify_file(data, expect_hash)
    features.require_supported(plan)
    if signers is None:
        return Admitted(plan, None)
    signers_bytes = _signers(signers)
    armored = _signature(signature_path(path, signature))
    signer = signing.verify(data, armored, signers_bytes, str(signers))
    return Admitted(plan, Signature(data, armored, signer, os.path.abspath(signers)))


def recheck(store: RunSource, run: Any, signers: Path | None) -> Signer | None:
    """Re-check a stored run before it is driven, approved or resumed. A child run is covered by its
    top-level run's signature: each link's plan hash must be the one embedded in its parent's plan.
    The allowed signers are `signers` when given, else the file the signature was checked against
    when the run was published, read again now: a key removed from it drives nothing more.
    Returns the signer, or None for an unsigned run when signatures are not required."""
    top = run
    for _ in range(MAX_DEPTH + 1):
        if top.parent_run_id is None:
            break
        parent = store.run(top.parent_run_id)
        if parent is None:
            raise PlanError("run", wording.missing_parent(run=top.id, parent=top.parent_run_id))
        _embedded(parent, top)
        top = parent
    else:
        raise PlanError("run", wording.too_many_ancestors(run=run.id, limit=MAX_DEPTH))
    recorded = store.signature(top.id)
    path = signers if signers is not None else Path(recorded.allowed_signers) if recorded is not None else None
    if path is None:
        return None
    if recorded is None:
        raise SignatureRefused("unsigned", wording.published_unsigned(run=top.id))
    signer = signing.verify(recorded.plan_file, recorded.signature, _signers(path), str(path))
    signed_hash = plan_hash(verify_file(recorded.plan_file))
    if signed_hash != top.plan_hash:
        mismatch = wording.signed_another_plan(run=top.id, plan_hash=top.plan_hash, signed=signed_hash)
        raise SignatureRefused("signature_mismatch", mismatch)
    return signer


def signed_by(store: RunSource, run: Any) -> Signer | None:
    """Who signed the plan a run executes, as recorded (a child run: its top-level run's signer)."""
    for _ in range(MAX_DEPTH + 1):
        if run is None or run.parent_run_id is None:
            break
        run = store.run(run.parent_run_id)
    recorded = store.signature(run.id) if run is not None else None
    return recorded.signer if recorded is not None else None


def _embedded(parent: Any, child: Any) -> None:
    """The child run's plan hash is the one its parent's plan embeds at the composing step."""
    step_id = (child.parent_unit_id or "").split(":")[0]
    plan = loads_strict(parent.plan_json.encode())
    if plan_hash(plan) != parent.plan_hash:
        raise PlanError("plan", wording.stored_hash_mismatch(run=parent.id, plan_hash=parent.plan_hash))
    steps = plan.get("steps") if isinstance(plan, dict) else None
    target = next((s.get("target") for s in steps or () if isinstance(s, dict) and s.get("stepId") == step_id), None)
    if (
        not isinstance(target, dict)
        or target.get("kind") != "child-workflow"
        or target.get("planHash") != child.plan_hash
    ):
        unembedded = wording.child_not_embedded(
            child=child.id, plan_hash=child.plan_hash, step=step_id, parent=parent.id
        )
        raise PlanError("plan", unembedded)


def admission(store: RunSource, run_id: str, signers: Path | None) -> Callable[[Any], None]:
    """The re-check of a stored run under its lock, before a drive (trust.recheck)."""

    def admit_stored(row: Any) -> None:
        if row.id == run_id:  # the child runs it drives are covered by this run's check
            recheck(store, row, signers)

    return admit_stored
