"""akm_run.signing: what a signature says about itself, bounded reads, and ssh-keygen's answers
turned into reasons (real keys, real ssh-keygen)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from akm_run import signing, trust
from akm_run.signing import SignatureRefused, Signer
from helpers import Keys, Runtime, source
from profiles import examples

ARMOR = b"-----BEGIN SSH SIGNATURE-----\n%s\n-----END SSH SIGNATURE-----\n"


@given(st.binary(max_size=512))
def test_any_bytes_parse_or_are_refused_as_a_bad_signature(data: bytes) -> None:
    for candidate in (data, ARMOR % data, ARMOR % base64.b64encode(b"SSHSIG\x00\x00\x00\x01" + data)):
        try:
            signing.parse(candidate)
        except SignatureRefused as refusal:
            assert refusal.reason == "bad_signature"


def test_parse_names_the_namespace_and_the_key_as_ssh_keygen_does(tmp_path: Path, keys: Keys) -> None:
    plan = tmp_path / "plan"
    plan.write_bytes(b"{}\n")
    envelope = signing.parse(keys.sign(plan, "ci", namespace="file").read_bytes())
    assert envelope.namespace == "file" and envelope.fingerprint == keys.fingerprint("ci")


def test_verify_returns_the_principal_and_refuses_other_bytes(keys: Keys) -> None:
    data = b'{"format": "akm-plan"}\n'
    armored = signing.sign(data, keys.key("ci"))
    allowed = keys.allowed("ci").read_bytes()
    assert signing.verify(data, armored, allowed) == Signer("ci@example.com", keys.fingerprint("ci"))
    with pytest.raises(SignatureRefused) as refusal:
        signing.verify(data + b" ", armored, allowed)
    assert refusal.value.reason == "signature_mismatch"
    with pytest.raises(SignatureRefused) as refusal:
        signing.verify(data, armored, b"")
    assert refusal.value.reason == "unlisted_signer"


def test_a_principal_list_in_one_line_names_the_first_principal(keys: Keys) -> None:
    data = b"plan"
    public = Path(f"{keys.key('ci')}.pub").read_text()
    signer = signing.verify(
        data, signing.sign(data, keys.key("ci")), f"ci@example.com,ops@example.com {public}".encode()
    )
    assert signer.principal == "ci@example.com"


def test_read_limited_refuses_large_and_special_files_without_blocking(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    with pytest.raises(ValueError, match="larger than 10 bytes"):
        signing.read_limited(big, 10)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="not a regular file"):
        signing.read_limited(tmp_path / "fifo", 10)
    (tmp_path / "link").symlink_to(big)
    assert signing.read_limited(tmp_path / "link", 11) == b"x" * 11


def test_admit_keeps_the_bytes_it_checked_when_the_file_changes_meanwhile(
    tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Time of check is time of use: the plan is read once, and those bytes are checked and kept."""
    (tmp_path / "ws").mkdir()
    src = source("""
        workflow "t" {
          step a {
            shell "true"
          }
        }
    """)
    plan = Runtime(tmp_path / "ws").compile("wf.akm", src)
    keys.sign(plan, "ci")
    original = plan.read_bytes()
    checked = signing.verify

    def swapped_meanwhile(data: bytes, signature: bytes, allowed_signers: bytes, *rest: str) -> Signer:
        plan.write_bytes(original.replace(b'"true"', b'"touch evil"'))
        return checked(data, signature, allowed_signers, *rest)

    monkeypatch.setattr(signing, "verify", swapped_meanwhile)
    admitted = trust.admit(plan, signers=keys.allowed("ci"))
    assert admitted.signature is not None and admitted.signature.plan_file == original
    assert admitted.plan["steps"][0]["target"]["command"] == "true"


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_allowed_signers_file_lists_the_signer_or_refuses(keys: Keys, content: bytes) -> None:
    data = b"plan"
    armored = signing.sign(data, keys.key("ci"))
    try:
        signing.verify(data, armored, content)
    except SignatureRefused as refusal:
        assert refusal.reason == "unlisted_signer"


def test_an_ssh_keygen_without_the_verb_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An OpenSSH older than `-Y find-principals` answers as this stand-in does."""
    old = tmp_path / "bin" / "ssh-keygen"
    old.parent.mkdir()
    old.write_text(
        source(r"""
            #!/bin/sh
            echo "Unsupported operation for -Y: \"$2\"" >&2
            exit 1
        """)
    )
    old.chmod(0o755)
    monkeypatch.setenv("PATH", str(old.parent))
    signature = ARMOR % base64.b64encode(
        b"SSHSIG\x00\x00\x00\x01"
        + b"".join(len(f).to_bytes(4, "big") + f for f in (b"key", b"akm-plan", b"", b"sha512", b"sig"))
    )
    with pytest.raises(signing.SigningUnavailable, match=r"has no `-Y find-principals`.*openssh-client"):
        signing.verify(b"plan", signature, b"")
