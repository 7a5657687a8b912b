"""Signed plans end to end (signing.md): real ed25519 keys made by ssh-keygen, plans compiled by
akmc and signed by `akmc sign`, run by a real `akm-run` process on a real store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from akm_run.plan import plan_hash, render_file
from helpers import Keys, Runtime, run_cli, source

TOUCH = source("""
    workflow "t" {
      step touch {
        shell "touch touched"
      }
    }
""")
WAIT = source("""
    workflow "w" {
      step wait {
        approval "ok?"
      }
      step after {
        shell "touch after"
      }
    }
""")
CHILD = source("""
    workflow "child" {
      step work {
        shell "touch child-ran"
      }
    }
""")
PARENT = source("""
    workflow "parent" {
      step call {
        uses "workflows/child"
      }
    }
""")


def signed(runtime: Runtime, keys: Keys, source: str = TOUCH, signer: str = "ci") -> Path:
    plan = runtime.compile("workflows/wf.akm", source)
    result = run_cli("sign", plan, "--key", keys.key(signer))
    assert result.returncode == 0, result.stderr
    return plan


def refused(runtime: Runtime, *args: str | Path, env: dict[str, str] | None = None) -> str:
    """Run a plan that must be refused: exit 4, nothing published, no unit ran. Returns stderr."""
    result = runtime.akm("run", *args, env=env)
    assert result.returncode == 4, (result.stdout, result.stderr)
    assert runtime.untouched() and not (runtime.root / "touched").exists()
    return result.stderr


def test_a_plan_signed_by_a_listed_key_runs_and_shows_its_signer(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys)
    code, document = runtime.run_json(plan, "--allowed-signers", keys.allowed("ci"))
    assert code == 0 and (runtime.root / "touched").exists()
    signer = {"principal": "ci@example.com", "fingerprint": keys.fingerprint("ci")}
    status = runtime.akm("status", document["runId"], "--format", "json")
    assert json.loads(status.stdout)["run"]["signedBy"] == signer
    text = runtime.akm("status", document["runId"]).stdout
    assert f"signed by ci@example.com ({keys.fingerprint('ci')})" in text
    [published] = [data for kind, _, _, data in runtime.store().events(document["runId"]) if kind == "run.published"]
    assert published["signedBy"] == signer


def test_the_allowed_signers_come_from_the_environment_too(runtime: Runtime, keys: Keys) -> None:
    plan = runtime.compile("workflows/wf.akm", TOUCH)
    env = runtime.env(AKM_RUN_ALLOWED_SIGNERS=str(keys.allowed("ci")))
    assert "unsigned" in refused(runtime, plan, env=env)
    run_cli("sign", plan, "--key", keys.key("ci"))
    assert runtime.akm("run", plan, env=env).returncode == 0


def test_without_allowed_signers_an_unsigned_plan_runs_as_before(runtime: Runtime) -> None:
    plan = runtime.compile("workflows/wf.akm", TOUCH)
    assert runtime.akm("run", plan).returncode == 0
    assert (
        "signedBy"
        not in json.loads(runtime.akm("status", runtime.store().runs()[0].id, "--format", "json").stdout)["run"]
    )


@pytest.mark.before_store
def test_an_unsigned_plan_is_refused(runtime: Runtime, keys: Keys) -> None:
    plan = runtime.compile("workflows/wf.akm", TOUCH)
    stderr = refused(runtime, plan, "--allowed-signers", keys.allowed("ci"))
    assert "unsigned: no signature" in stderr and "wf.plan.json.sig" in stderr


@pytest.mark.before_store
def test_a_plan_signed_by_an_unlisted_key_is_refused(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys, signer="mallory")
    stderr = refused(runtime, plan, "--allowed-signers", keys.allowed("ci"))
    assert f"unlisted signer: signed with key {keys.fingerprint('mallory')}" in stderr


@pytest.mark.before_store
def test_a_signature_for_another_namespace_is_refused(runtime: Runtime, keys: Keys) -> None:
    plan = runtime.compile("workflows/wf.akm", TOUCH)
    keys.sign(plan, "ci", namespace="git")
    stderr = refused(runtime, plan, "--allowed-signers", keys.allowed("ci"))
    assert "wrong namespace: the signature is for namespace 'git', not 'akm-plan'" in stderr


@pytest.mark.before_store
def test_a_key_listed_only_for_other_namespaces_is_refused(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys)
    stderr = refused(runtime, plan, "--allowed-signers", keys.allowed("ci", options='namespaces="git"'))
    assert "not allowed: ci@example.com" in stderr and "not for namespace 'akm-plan'" in stderr


@pytest.mark.parametrize(
    ("options", "said"),
    [("valid-before=20200101", "expired on 2020-01-01"), ('valid-after="29990101"', "valid only from 2999-01-01")],
)
@pytest.mark.before_store
def test_a_key_outside_its_validity_dates_says_so(runtime: Runtime, keys: Keys, options: str, said: str) -> None:
    plan = signed(runtime, keys)
    stderr = refused(runtime, plan, "--allowed-signers", keys.allowed("ci", options=options))
    assert "unlisted" not in stderr and "not allowed: ci@example.com" in stderr and said in stderr, stderr


@pytest.mark.before_store
def test_a_plan_edited_after_signing_and_rehashed_is_refused(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys)
    document = json.loads(plan.read_text())
    document["plan"]["steps"][0]["target"]["command"] = "touch touched; touch evil"
    plan.write_text(render_file(document["plan"]))  # self-consistent: a fresh planHash
    assert runtime.akm("verify", plan).returncode == 0
    stderr = refused(runtime, plan, "--allowed-signers", keys.allowed("ci"))
    assert "signature mismatch" in stderr and "changed after it was signed" in stderr
    assert not (runtime.root / "evil").exists()


def _forge(plan: Path) -> None:
    """The adversary of the issue: change the child's command, re-hash the child and the parent."""
    document = json.loads(plan.read_text())
    target = document["plan"]["steps"][0]["target"]
    target["plan"]["steps"][0]["target"]["command"] = "touch forged"
    target["planHash"] = plan_hash(target["plan"])
    plan.write_text(render_file(document["plan"]))


def test_the_forged_plan_runs_unsigned_and_is_refused_when_signatures_are_required(
    runtime: Runtime, keys: Keys
) -> None:
    runtime.write({"workflows/child.akm": CHILD})
    plan = runtime.compile("workflows/parent.akm", PARENT)
    assert run_cli("sign", plan, "--key", keys.key("ci")).returncode == 0
    _forge(plan)
    allowed = keys.allowed("ci")
    assert refused(runtime, plan, "--allowed-signers", allowed).count("signature mismatch") == 1
    assert not (runtime.root / "forged").exists()
    assert runtime.akm("run", plan).returncode == 0  # integrity alone cannot tell the forgery
    assert (runtime.root / "forged").exists()


def test_expect_hash_and_a_signature_must_both_hold(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys)
    allowed = keys.allowed("ci")
    stderr = refused(runtime, plan, "--allowed-signers", allowed, "--expect-hash", "sha256:" + "0" * 64)
    assert "--expect-hash" in stderr
    right = json.loads(plan.read_text())["planHash"]
    assert runtime.akm("run", plan, "--allowed-signers", allowed, "--expect-hash", right).returncode == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"garbage\n", "bad signature: not an SSH signature"),
        (b"\xff\xfe\x00" * 10, "bad signature: not an SSH signature"),
        (b"-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n", "bad signature"),
        (b"-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----\n", "not valid base64"),
        (b"A" * (1024 * 1024), "larger than 65536 bytes"),
    ],
)
@pytest.mark.before_store
def test_a_garbage_or_huge_signature_is_refused(runtime: Runtime, keys: Keys, content: bytes, message: str) -> None:
    plan = runtime.compile("workflows/wf.akm", TOUCH)
    plan.with_name(plan.name + ".sig").write_bytes(content)
    assert message in refused(runtime, plan, "--allowed-signers", keys.allowed("ci"))


@pytest.mark.before_store
def test_a_signature_that_is_a_fifo_or_a_directory_is_refused_without_waiting(runtime: Runtime, keys: Keys) -> None:
    plan = runtime.compile("workflows/wf.akm", TOUCH)
    os.mkfifo(runtime.root / "fifo")
    (runtime.root / "dir").mkdir()
    for other, why in (("fifo", "not a regular file"), ("dir", "Is a directory")):
        stderr = refused(runtime, plan, "--allowed-signers", keys.allowed("ci"), "--signature", runtime.root / other)
        assert "bad signature: cannot read the signature" in stderr and why in stderr


def test_a_symlinked_signature_is_followed(runtime: Runtime, keys: Keys) -> None:
    """A signature proves itself: where it is stored does not matter, so a link to it works."""
    plan = signed(runtime, keys)
    signature = plan.with_name(plan.name + ".sig")
    (runtime.root / "signatures").mkdir()
    signature.rename(runtime.root / "signatures" / "wf.sig")
    signature.symlink_to(runtime.root / "signatures" / "wf.sig")
    assert runtime.akm("run", plan, "--allowed-signers", keys.allowed("ci")).returncode == 0


@pytest.mark.before_store
def test_no_ssh_keygen_while_signatures_are_required_is_a_clear_error(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys)
    env = runtime.env(PATH=str(runtime.root / "empty-path"))
    result = runtime.akm("run", plan, "--allowed-signers", keys.allowed("ci"), env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "ssh-keygen" in result.stderr and "openssh-client" in result.stderr
    assert runtime.untouched() and not (runtime.root / "touched").exists()
    assert runtime.akm("verify", plan, env=env).returncode == 0  # not required: not needed


@pytest.mark.before_store
def test_an_unreadable_allowed_signers_file_is_a_usage_error(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys)
    result = runtime.akm("run", plan, "--allowed-signers", runtime.root / "missing")
    assert result.returncode == 2 and "cannot read the allowed signers file" in result.stderr
    assert runtime.untouched()


# -- re-drives -----------------------------------------------------------------------------------------


def test_re_drives_recheck_the_signature_and_a_removed_key_drives_nothing_more(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys, WAIT)
    allowed = keys.allowed("ci", "ops")
    code, document = runtime.run_json(plan, "--allowed-signers", allowed)
    run_id = document["runId"]
    assert code == 3
    with runtime.paused():  # the key goes before anything drives the approved run
        assert runtime.akm("approve", run_id, "wait").returncode == 0  # the recorded allowed signers file
        keys.allowed("ops")  # the CI key is removed from the same file
    result = runtime.akm("run", run_id)
    assert result.returncode == 4 and "unlisted signer" in result.stderr
    assert not (runtime.root / "after").exists()
    assert runtime.akm("resume", run_id).returncode == 4
    keys.allowed("ci")  # put back: the run goes on
    assert runtime.akm("run", run_id).returncode == 0 and (runtime.root / "after").exists()


def test_a_removed_key_leaves_its_runs_to_abandon(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys, WAIT)
    allowed = keys.allowed("ci")
    _, document = runtime.run_json(plan, "--allowed-signers", allowed)
    keys.allowed("ops")
    assert runtime.akm("approve", document["runId"], "wait").returncode == 4
    assert runtime.akm("abandon", document["runId"]).returncode == 0
    run_row = runtime.store().run(document["runId"])
    assert run_row is not None and run_row.status == "failed"


def test_an_unsigned_run_is_refused_once_signatures_are_required(runtime: Runtime, keys: Keys) -> None:
    plan = runtime.compile("workflows/wf.akm", WAIT)
    _, document = runtime.run_json(plan)
    result = runtime.akm("approve", document["runId"], "wait", "--allowed-signers", keys.allowed("ci"))
    assert result.returncode == 4 and "was published without a signature" in result.stderr
    env = runtime.env(AKM_RUN_ALLOWED_SIGNERS=str(keys.allowed("ci")))
    assert runtime.akm("run", document["runId"], env=env).returncode == 4


def test_a_tampered_stored_signature_is_refused(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys, WAIT)
    _, document = runtime.run_json(plan, "--allowed-signers", keys.allowed("ci"))
    forged = plan.read_bytes().replace(b"touch after", b"touch evil!")
    runtime.sql("UPDATE signatures SET plan_file = ?", forged)
    result = runtime.akm("approve", document["runId"], "wait")
    assert result.returncode == 4 and "refused run" in result.stderr


def test_a_child_run_is_covered_by_its_parents_signature(runtime: Runtime, keys: Keys) -> None:
    runtime.write({"workflows/child.akm": CHILD.replace('shell "touch child-ran"', 'approval "child ok?"')})
    plan = runtime.compile("workflows/parent.akm", PARENT)
    run_cli("sign", plan, "--key", keys.key("ci"))
    code, document = runtime.run_json(plan, "--allowed-signers", keys.allowed("ci"))
    assert code == 3
    [child] = runtime.store().child_runs(document["runId"])
    status = json.loads(runtime.akm("status", child.id, "--format", "json").stdout)
    assert status["run"]["signedBy"]["principal"] == "ci@example.com"
    assert runtime.akm("approve", child.id, "work").returncode == 0  # checked through the parent
    [[stored]] = runtime.sql("SELECT plan_json FROM runs WHERE id = ?", child.id)
    forged = json.loads(stored)  # a consistent forgery of the child row
    forged["title"] = "forged"
    runtime.sql(
        "UPDATE runs SET plan_json = ?, plan_hash = ? WHERE id = ?", json.dumps(forged), plan_hash(forged), child.id
    )
    result = runtime.akm("resume", child.id)
    assert result.returncode == 4 and "does not embed" in result.stderr


# -- akmc sign, akmc verify ----------------------------------------------------------------------------


@pytest.mark.before_store
def test_akmc_verify_answers_the_same_question(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys)
    good = run_cli("verify", plan, "--allowed-signers", keys.allowed("ci"))
    assert good.returncode == 0 and f"signed by ci@example.com ({keys.fingerprint('ci')})" in good.stdout
    bad = run_cli("verify", plan, "--allowed-signers", keys.allowed("ops"))
    assert bad.returncode == 4 and "unlisted signer" in bad.stderr
    assert run_cli("verify", plan).returncode == 0


@pytest.mark.before_store
def test_akmc_sign_signs_several_plans_and_refuses_one_that_does_not_verify(runtime: Runtime, keys: Keys) -> None:
    first = runtime.compile("workflows/a.akm", TOUCH)
    second = runtime.compile("workflows/b.akm", WAIT)
    broken = runtime.root / "plans" / "broken.plan.json"
    broken.write_text("{}")
    result = run_cli("sign", first, broken, second, "--key", keys.key("ci"))
    assert result.returncode == 4 and "refused" in result.stderr and "broken.plan.json" in result.stderr
    assert not broken.with_name("broken.plan.json.sig").exists()
    for plan in (first, second):
        assert run_cli("verify", plan, "--allowed-signers", keys.allowed("ci")).returncode == 0


def test_akmc_sign_to_another_location(runtime: Runtime, keys: Keys) -> None:
    plan = runtime.compile("workflows/wf.akm", TOUCH)
    elsewhere = runtime.root / "wf.signature"
    assert run_cli("sign", plan, "--key", keys.key("ci"), "--signature", elsewhere).returncode == 0
    allowed = keys.allowed("ci")
    assert run_cli("verify", plan, "--allowed-signers", allowed, "--signature", elsewhere).returncode == 0
    assert runtime.akm("run", plan, "--allowed-signers", allowed, "--signature", elsewhere).returncode == 0
    two = run_cli("sign", plan, plan, "--key", keys.key("ci"), "--signature", elsewhere)
    assert two.returncode == 2 and "one plan" in two.stderr


@pytest.mark.before_store
def test_akmc_sign_with_a_missing_key_is_a_clear_error(runtime: Runtime) -> None:
    plan = runtime.compile("workflows/wf.akm", TOUCH)
    result = run_cli("sign", plan, "--key", runtime.root / "no-such-key")
    assert result.returncode == 2 and "could not sign" in result.stderr and "Traceback" not in result.stderr
    assert not plan.with_name(plan.name + ".sig").exists()


def test_a_parent_drive_refuses_a_child_row_that_runs_another_plan(runtime: Runtime, keys: Keys) -> None:
    """The parent's signature covers the child's plan hash; a re-published child row must match it."""
    runtime.write({"workflows/child.akm": CHILD.replace('shell "touch child-ran"', 'approval "child ok?"')})
    plan = runtime.compile("workflows/parent.akm", PARENT)
    run_cli("sign", plan, "--key", keys.key("ci"))
    _, document = runtime.run_json(plan, "--allowed-signers", keys.allowed("ci"))
    [child] = runtime.store().child_runs(document["runId"])
    [[stored]] = runtime.sql("SELECT plan_json FROM runs WHERE id = ?", child.id)
    forged = json.loads(stored)
    forged["steps"][0]["target"] = {"kind": "shell", "command": "touch forged"}
    runtime.sql(
        "UPDATE runs SET plan_json = ?, plan_hash = ? WHERE id = ?", json.dumps(forged), plan_hash(forged), child.id
    )
    assert runtime.akm("resume", document["runId"]).returncode == 0  # the parent itself is intact
    code, result = runtime.run_json(document["runId"])
    assert code == 1 and "does not run the plan this step embeds" in json.dumps(result)
    assert not (runtime.root / "forged").exists()


def test_a_run_whose_parents_form_a_cycle_is_refused(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys, WAIT)
    _, document = runtime.run_json(plan, "--allowed-signers", keys.allowed("ci"))
    runtime.sql("UPDATE runs SET parent_run_id = id, parent_unit_id = 'wait:solo'")
    result = runtime.akm("approve", document["runId"], "wait", timeout=30)
    assert result.returncode == 4 and "refused run" in result.stderr


def test_a_recorded_allowed_signers_file_that_is_gone_is_named(runtime: Runtime, keys: Keys) -> None:
    plan = signed(runtime, keys, WAIT)
    allowed = keys.allowed("ci")
    _, document = runtime.run_json(plan, "--allowed-signers", allowed)
    allowed.unlink()
    result = runtime.akm("approve", document["runId"], "wait")
    assert result.returncode == 2 and f"cannot read the allowed signers file {allowed}" in result.stderr
    assert runtime.akm("approve", document["runId"], "wait", "--allowed-signers", keys.allowed("ci")).returncode == 0
