"""SSH signatures over a plan file's exact bytes (signing.md), made and checked by `ssh-keygen -Y`.

OpenSSH does the cryptography; this module reads the inputs once (bounded, regular files), hands
ssh-keygen private copies of exactly those bytes, and turns its answers into a reason a user can act on."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from akm_run import wording

NAMESPACE = "akm-plan"
SIGNERS_VARIABLE = "AKM_RUN_ALLOWED_SIGNERS"
MAX_SIGNATURE_BYTES = 64 * 1024  # an ed25519 signature is ~300 bytes, an RSA-16384 one ~3 KiB
MAX_SIGNERS_BYTES = 1024 * 1024
SSH_KEYGEN_TIMEOUT_S = 60
_BEGIN, _END = b"-----BEGIN SSH SIGNATURE-----", b"-----END SSH SIGNATURE-----"
SETUP_HINT = "install OpenSSH 8.2 or later (Debian/Ubuntu: apt-get install openssh-client)"


REASONS = ("unsigned", "bad_signature", "wrong_namespace", "unlisted_signer", "not_allowed", "signature_mismatch")


class SignatureRefused(Exception):
    """The plan does not carry a valid signature by an allowed signer (exit 4); `reason` is one of
    REASONS and begins the message."""

    def __init__(self, reason: str, message: str) -> None:
        assert reason in REASONS, reason
        super().__init__(wording.signature_refused(reason=reason.replace("_", " "), message=message))
        self.reason = reason


class SigningUnavailable(Exception):
    """Signatures cannot be made or checked on this host: no ssh-keygen, an unreadable allowed
    signers file or key (exit 2). Nothing about the plan was decided."""


@dataclass(frozen=True, slots=True)
class Signer:
    principal: str
    fingerprint: str

    def document(self) -> dict[str, str]:
        return {"principal": self.principal, "fingerprint": self.fingerprint}


@dataclass(frozen=True, slots=True)
class Envelope:
    """What an SSH signature says about itself before it is checked."""

    namespace: str
    fingerprint: str  # SHA256:… of the signing public key, as ssh-keygen -l prints it


def read_limited(path: str | os.PathLike[str], limit: int) -> bytes:
    """A regular file's bytes, at most `limit` (symlinks are followed; FIFOs and devices are refused
    without blocking). Raises OSError, or ValueError when the file is not regular or too large."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(wording.not_regular())
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(wording.larger_than(limit=limit))
    return data


def parse(armored: bytes) -> Envelope:
    """Decode an armored SSHSIG (PROTOCOL.sshsig) far enough to name its namespace and key."""
    text = armored.strip()
    if not (text.startswith(_BEGIN) and text.endswith(_END)):
        raise SignatureRefused("bad_signature", wording.no_armor())
    try:
        blob = base64.b64decode(b"".join(text[len(_BEGIN) : -len(_END)].split()), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureRefused("bad_signature", wording.not_base64()) from None
    fields: list[bytes] = []
    at = 10  # "SSHSIG" and the uint32 version
    if blob[:6] != b"SSHSIG" or int.from_bytes(blob[6:10], "big") != 1:
        raise SignatureRefused("bad_signature", wording.not_sshsig())
    for _ in range(5):  # public key, namespace, reserved, hash algorithm, signature
        size = int.from_bytes(blob[at : at + 4], "big")
        if at + 4 > len(blob) or at + 4 + size > len(blob):
            raise SignatureRefused("bad_signature", wording.truncated_signature())
        fields.append(blob[at + 4 : at + 4 + size])
        at += 4 + size
    digest = base64.b64encode(hashlib.sha256(fields[0]).digest()).decode().rstrip("=")
    return Envelope(fields[1].decode("utf-8", "replace"), f"SHA256:{digest}")


def ssh_keygen() -> str:
    """The ssh-keygen on PATH, or SigningUnavailable naming what to install."""
    found = shutil.which("ssh-keygen")
    if found is None:
        raise SigningUnavailable(wording.no_ssh_keygen(setup=SETUP_HINT))
    return found


def _keygen(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        done = subprocess.run(
            [ssh_keygen(), "-Y", *args], input=data or b"", capture_output=True, timeout=SSH_KEYGEN_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise SigningUnavailable(wording.ssh_keygen_timeout(verb=args[0], seconds=SSH_KEYGEN_TIMEOUT_S)) from None
    except OSError as error:
        raise SigningUnavailable(wording.ssh_keygen_failed(error=error)) from None
    if b"Unsupported operation for -Y" in done.stderr:  # an OpenSSH older than the verb
        raise SigningUnavailable(wording.ssh_keygen_too_old(verb=args[0], setup=SETUP_HINT))
    return done


def verify(data: bytes, signature: bytes, allowed_signers: bytes, signers_name: str = "the allowed signers") -> Signer:
    """Check that `signature` is a valid `akm-plan` SSH signature over exactly `data` by a principal
    that `allowed_signers` (git's format) allows to sign in this namespace. Raises SignatureRefused
    (saying which check failed) or SigningUnavailable."""
    envelope = parse(signature)
    if envelope.namespace != NAMESPACE:
        raise SignatureRefused(
            "wrong_namespace", wording.wrong_namespace(namespace=envelope.namespace, expected=NAMESPACE)
        )
    ssh_keygen()
    with tempfile.TemporaryDirectory(prefix="akm-signature-") as private:  # 0700: ours alone
        sig_file, signers_file = Path(private, "plan.sig"), Path(private, "allowed_signers")
        sig_file.write_bytes(signature)
        signers_file.write_bytes(allowed_signers)
        found = _keygen("find-principals", "-s", str(sig_file), "-f", str(signers_file))
        principals = (
            [p for p in found.stdout.decode("utf-8", "replace").splitlines() if p] if not found.returncode else []
        )
        if not principals:
            if (outside := _outside_dates(allowed_signers, envelope.fingerprint, signers_name)) is not None:
                raise SignatureRefused("not_allowed", outside)
            unlisted = wording.unlisted_signer(fingerprint=envelope.fingerprint, signers=signers_name)
            raise SignatureRefused("unlisted_signer", unlisted)
        for principal in principals:
            checked = _keygen(
                "verify", "-f", str(signers_file), "-I", principal, "-n", NAMESPACE, "-s", str(sig_file), data=data
            )
            if checked.returncode == 0:
                return Signer(principal, envelope.fingerprint)
        intact = _keygen("check-novalidate", "-n", NAMESPACE, "-s", str(sig_file), data=data).returncode == 0
    who = f"{', '.join(principals)} ({envelope.fingerprint})"
    if not intact:
        raise SignatureRefused("signature_mismatch", wording.changed_after_signing(who=who))
    raise SignatureRefused("not_allowed", wording.not_allowed_now(who=who, signers=signers_name, namespace=NAMESPACE))


_KEY = re.compile(rb"(?:^|\s)((?:ssh|ecdsa|sk)-[\w@.-]+)\s+([A-Za-z0-9+/]+=*)")
_DATE = re.compile(rb'(valid-before|valid-after)="?(\d{8})(\d{4,6})?(Z?)"?', re.IGNORECASE)


def _outside_dates(allowed_signers: bytes, fingerprint: str, signers_name: str) -> str | None:
    """Why ssh-keygen found no principal for a key that `allowed_signers` does list: its
    valid-before date has passed, or its valid-after date has not come (None: it is not listed)."""
    for line in allowed_signers.splitlines():
        key = _KEY.search(line)
        if key is None or line.lstrip().startswith(b"#"):
            continue
        try:
            blob = base64.b64decode(key.group(2), validate=True)
        except (binascii.Error, ValueError):
            continue
        if f"SHA256:{base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip('=')}" != fingerprint:
            continue
        who = line[: key.start()].split(None, 1)[0].decode("utf-8", "replace")
        now = time.strftime("%Y%m%d%H%M%S", time.gmtime() if b"Z" in line else time.localtime()).encode()
        for option, day, clock, zone in _DATE.findall(line[: key.start()]):
            before, stamp = option.lower() == b"valid-before", (day + clock).ljust(14, b"0")
            if (stamp > now) if before else (stamp <= now):
                continue  # not the date that excludes it
            when = f"{day[:4].decode()}-{day[4:6].decode()}-{day[6:].decode()}"
            if clock:
                when += f" {clock[:2].decode()}:{clock[2:4].decode()}" + (" UTC" if zone else "")
            outside = wording.key_expired if before else wording.key_not_yet_valid
            return outside(who=who, fingerprint=fingerprint, signers=signers_name, when=when)
    return None


def sign(data: bytes, key: Path) -> bytes:
    """An armored `akm-plan` SSH signature over `data` made with `key` (a private key, or a public
    key whose private half is in ssh-agent). Raises SigningUnavailable with ssh-keygen's reason."""
    made = _keygen("sign", "-f", str(key), "-n", NAMESPACE, data=data)
    if made.returncode != 0 or not made.stdout.startswith(_BEGIN):
        reason = made.stderr.decode("utf-8", "replace").replace("Signing data on standard input", "").strip()
        raise SigningUnavailable(wording.cannot_sign(key=key, reason=reason or f"exit {made.returncode}"))
    return made.stdout
