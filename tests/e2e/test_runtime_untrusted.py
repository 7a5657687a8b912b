"""What reaches akm-run from outside it is untrusted: what units print, the command line, params
files, what a unit does to the state directory. None of it can make a command exit 70 (internal
error), leak a secret, or let two drivers drive one run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from akm_run import strictjson
from akm_run.outcomes import text as journal_text
from helpers import Runtime, eventually, source
from profiles import examples

# A unit that prints the bytes of the file named by its item (or by `$OUT`), exactly.
EMIT = source("""
    #!/usr/bin/env python3
    import json, os, sys
    context = json.load(open(os.environ["AKM_CONTEXT"]))
    name = context.get("item", os.environ.get("OUT", "out.bin"))
    sys.stdout.buffer.write(open(name, "rb").read())
""")

ONE_STEP = source("""
    workflow "t" {
      step emit {
        script "scripts/emit.py"
        retry = { max = 2, on = [output_invalid] }
        on_error = continue
      }
      step after {
        shell "echo after"
      }
    }
""")


def emitted(runtime: Runtime, stdout: bytes, stderr: bytes = b"") -> tuple[int, dict[str, Any], str]:
    """Run ONE_STEP whose unit prints `stdout` (and `stderr`): (exit code, emit's step, run id)."""
    runtime.write({"scripts/emit.py": EMIT})
    (runtime.root / "out.bin").write_bytes(stdout)
    if stderr:
        runtime.write({"scripts/emit.py": EMIT + f"sys.stderr.buffer.write({stderr!r})\n"})
    plan = runtime.compile("wf.akm", ONE_STEP)
    result = runtime.akm("run", plan, "--format", "json")
    assert result.returncode != 70, result.stderr
    document = json.loads(result.stdout)
    status = json.loads(runtime.akm("status", document["runId"], "--format", "json").stdout)
    return result.returncode, {s["stepId"]: s for s in status["steps"]}["emit"], document["runId"]


# -- finding: unit output that is not Unicode text ---------------------------------------------------------


@pytest.mark.parametrize(
    "stdout",
    [
        b'"\\ud800"',
        b'{"a": ["x", "\\udfff"]}',
        b'{"\\udc00": 1}',
        b'"\\ud800\\ud800\\ud800"',
        b'{"\\ud800":1,"\\ud800":2}',
    ],
    ids=["lone-high", "nested-low", "key", "only-surrogates", "duplicate-surrogate-key"],
)
def test_a_lone_surrogate_in_unit_output_is_output_invalid(runtime: Runtime, stdout: bytes) -> None:
    code, step, run_id = emitted(runtime, stdout)
    assert code == 0  # on_error = continue applies: the run goes on to `after`
    assert step["status"] == "failed" and step["failureReason"] == "output_invalid", step
    assert "surrogate" in step["failureMessage"] or "duplicate" in step["failureMessage"]
    attempts = runtime.store().attempts(run_id, "emit:solo")
    assert [a.reason for a in attempts] == ["output_invalid"] * 3  # retry.on = [output_invalid] applies
    assert runtime.akm("logs", run_id).returncode == 0


def test_a_valid_surrogate_pair_is_its_character(runtime: Runtime) -> None:
    code, step, _ = emitted(runtime, b'"\\ud83d\\ude00"')
    assert code == 0 and step["status"] == "completed" and step["output"] == "\U0001f600"


@pytest.mark.parametrize(
    ("stdout", "stderr"),
    [(b"\xff\xfe not utf-8 \xc3", b"\xff\x00\xed\xa0\x80"), (b'"\xed\xa0\x80"', b""), (b"\x00" * 100, b"\x00")],
    ids=["bytes", "encoded-surrogate", "nul"],
)
def test_bytes_that_are_not_utf8_never_end_a_drive(runtime: Runtime, stdout: bytes, stderr: bytes) -> None:
    code, step, run_id = emitted(runtime, stdout, stderr)
    assert code == 0 and step["status"] == "completed", step
    assert "\ufffd" in step["output"]
    logs = runtime.akm("logs", run_id)
    assert logs.returncode == 0 and "\x00" not in logs.stdout


def test_a_unit_that_closes_stdout_and_prints_nothing_completes(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step quiet {
            shell "exec >&-; echo err >&2"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0, document
    quiet_step = runtime.store().step(document["runId"], "quiet")
    assert quiet_step is not None and quiet_step.output == ""


# -- finding: the command line and params files -----------------------------------------------------------

APPROVAL = source("""
    workflow "p" {
      params { who: string = "ada" }
      step wait {
        approval "ok?"
        inputs = [params.who]
      }
    }
""")


def raw(runtime: Runtime, *args: bytes | str | Path, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """`akm-run ARGS` with arguments as given, bytes included (argv is bytes, not text)."""
    runtime.pool()
    argv = [os.fsencode(a) if not isinstance(a, bytes) else a for a in args]
    return subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"akm_run", *argv],
        cwd=runtime.root,
        capture_output=True,
        env=runtime.env(),
        timeout=timeout,
    )


def refused(result: subprocess.CompletedProcess[bytes], code: int = 2) -> str:
    """The one-line error of a refused command (exit `code`, no traceback)."""
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == code, err
    assert err.startswith("akm-run: ") and "Traceback" not in err and "internal error" not in err, err
    return err


@pytest.mark.parametrize(
    "argv",
    [
        [b"run", b"PLAN", b"--param", b"who=\xff"],
        [b"run", b"PLAN", b"--param", b"\xed\xa0\x80=x"],
        [b"approve", b"RUN", b"wait", b"--by", b"\xffbob"],
        [b"approve", b"RUN", b"wait", b"--note", b"caf\xe9"],
        [b"status", b"RUN\xff"],
        [b"run", b"RUN\xff"],
        [b"logs", b"RUN", b"st\xffep"],
        [b"list", b"--state-dir", b"st\xff"],
    ],
    ids=["param-value", "param-name", "by", "note", "status-run", "run-run", "logs-step", "state-dir"],
)
def test_arguments_that_are_not_utf8_are_a_usage_error(runtime: Runtime, argv: list[bytes]) -> None:
    plan = runtime.compile("wf.akm", APPROVAL)
    code, document = runtime.run_json(plan)
    assert code == 3
    given = [os.fsencode(plan) if a == b"PLAN" else a.replace(b"RUN", document["runId"].encode()) for a in argv]
    err = refused(raw(runtime, *given))
    assert "UTF-8" in err and len(err.strip().splitlines()) == 1, err
    wait_step = runtime.store().step(document["runId"], "wait")
    assert wait_step is not None and wait_step.status == "blocked"


@pytest.mark.parametrize("variable", ["USER", "AKM_AGENT_CMD", "AKM_STATE_DIR"])
def test_non_utf8_in_the_environment_the_runtime_reads_is_a_usage_error(runtime: Runtime, variable: str) -> None:
    plan = runtime.compile("wf.akm", APPROVAL)
    code, document = runtime.run_json(plan)
    assert code == 3
    env = {**runtime.env(), "LOGNAME": "", variable: os.fsdecode(b"b\xffb")}
    result = subprocess.run(
        [sys.executable, "-m", "akm_run", "approve", document["runId"], "wait"],
        cwd=runtime.root,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert "UTF-8" in refused(result)
    wait_step = runtime.store().step(document["runId"], "wait")
    assert wait_step is not None and wait_step.status == "blocked"


@pytest.mark.parametrize(
    "content",
    [b'{"who": "\\ud800"}', b'{"who": "\\udc80x"}', b'{"\\ud800": 1}', b'{"who": "\xff"}'],
    ids=["value", "low", "key", "bytes"],
)
@pytest.mark.before_store
def test_params_files_that_are_not_unicode_text_are_refused(runtime: Runtime, content: bytes) -> None:
    plan = runtime.compile("wf.akm", APPROVAL)
    (runtime.root / "params.json").write_bytes(content)
    err = refused(raw(runtime, "run", plan, "--params-file", "params.json"))
    assert "params file" in err and len(err.strip().splitlines()) == 1
    assert runtime.untouched()


@pytest.mark.parametrize("kind", ["dev-zero", "symlink-to-dev-zero", "fifo", "directory", "too-large", "missing"])
@pytest.mark.before_store
def test_params_files_that_are_not_bounded_regular_files_are_refused(runtime: Runtime, kind: str) -> None:
    plan = runtime.compile("wf.akm", APPROVAL)
    path = runtime.root / "params.json"
    if kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "symlink-to-dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)  # nothing ever writes to it: reading would wait forever
    elif kind == "directory":
        path.mkdir()
    elif kind == "too-large":
        path.write_text('{"who": "' + "a" * (1024 * 1024) + '"}')
    err = refused(raw(runtime, "run", plan, "--params-file", path, timeout=30))
    assert "params file" in err
    if kind in ("dev-zero", "symlink-to-dev-zero", "fifo"):
        assert "not a regular file" in err
    if kind == "directory":
        assert "is a directory" in err.lower()
    if kind == "too-large":
        assert "1048576 bytes" in err
    assert runtime.untouched()


# -- finding: secrets are redacted before anything is cut -------------------------------------------------

SECRET = "s3cr3t-" + "".join(chr(ord("a") + i % 26) for i in range(40)) + "-end"


def test_a_secret_straddling_the_stderr_tail_cut_is_redacted_whole(runtime: Runtime) -> None:
    tail = 64 * 1024
    half = len(SECRET) // 2
    runtime.write(
        {
            "scripts/leak.py": source(f"""
                #!/usr/bin/env python3
                import os, sys
                secret = os.environ["TOKEN"]
                sys.stderr.write(secret + "x" * ({tail} - {half}))  # the cut falls inside the secret
                sys.stderr.write("\\n" + "y" * 190 + secret + "\\n")  # the message's cut falls inside it too
                sys.stdout.write("z" * ({tail} - {half}) + secret)  # and the stdout kept of a failed unit
                sys.exit(3)
            """)
        }
    )
    src = source("""
        workflow "t" {
          step leak {
            script "scripts/leak.py"
            env { TOKEN = secret("AKM_TEST_TOKEN") }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    env = runtime.unit_env(AKM_TEST_TOKEN=SECRET)
    code, document = runtime.run_json(plan, env=env)
    assert code == 1, document
    [attempt] = runtime.store().attempts(document["runId"], "leak:solo")
    shown = runtime.akm("logs", document["runId"], "--format", "json").stdout
    for kept in (attempt.stderr_tail or "", attempt.message or "", json.dumps(attempt.output), shown):
        for piece in (SECRET[:12], SECRET[half : half + 12], SECRET[-12:]):
            assert piece not in kept
    assert len((attempt.stderr_tail or "").encode()) <= tail


# -- finding: refused stdout is kept to be seen ----------------------------------------------------------


def test_logs_show_the_beginning_of_refused_stdout_redacted_escaped_and_bounded(runtime: Runtime) -> None:
    runtime.write(
        {
            "scripts/typed.py": source("""
                #!/usr/bin/env python3
                import os, sys
                sys.stdout.write('{"a": "begins-' + os.environ["TOKEN"] + '-\\x1b]0;pwned\\x07", "pad": "'
                                 + "p" * 500000 + '"}')
            """)
        }
    )
    src = source("""
        workflow "t" {
          step typed {
            script "scripts/typed.py"
            env { TOKEN = secret("AKM_TEST_TOKEN") }
            output: { a: int }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    env = runtime.unit_env(AKM_TEST_TOKEN=SECRET)
    code, document = runtime.run_json(plan, env=env)
    assert code == 1 and document["failure"]["reason"] == "output_invalid", document
    for fmt in ("text", "json"):
        logs = runtime.akm("logs", document["runId"], "--format", fmt)
        assert logs.returncode == 0
        assert "its stdout began" in logs.stdout and "begins-***-" in logs.stdout, logs.stdout
        assert SECRET[:12] not in logs.stdout and "\x1b" not in logs.stdout and "\x07" not in logs.stdout
        assert len(logs.stdout) < 4000


# -- finding: abandoned runs and expired signers say so ----------------------------------------------------


def test_an_abandoned_run_says_it_was_abandoned(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", APPROVAL)
    code, document = runtime.run_json(plan)
    assert code == 3
    run_id = document["runId"]
    assert runtime.akm("abandon", run_id).returncode == 0
    again = runtime.akm("run", run_id)
    assert "None" not in again.stdout + again.stderr and "abandoned" in again.stdout + again.stderr
    code, result = runtime.run_json(run_id)
    assert result["failure"]["reason"] == "abandoned"
    text = runtime.akm("status", run_id).stdout
    assert "abandoned" in text.splitlines()[1], text
    status = json.loads(runtime.akm("status", run_id, "--format", "json").stdout)
    assert status["run"]["status"] == "failed" and status["run"]["failure"]["reason"] == "abandoned"


# -- finding: a unit cannot open its run to a second driver ------------------------------------------------


def test_a_unit_deleting_its_runs_lock_does_not_let_a_second_driver_in(runtime: Runtime) -> None:
    runtime.write(
        {
            "scripts/vandal.sh": source("""
                #!/bin/sh
                state=$(dirname "$(dirname "$(dirname "$AKM_CONTEXT")")")
                rm -rf "$state/locks" "$STATE/locks"
                echo ran >> ran
                while [ ! -e go ]; do sleep 0.05; done
            """)
        }
    )
    src = source("""
        workflow "t" {
          step vandal {
            script "scripts/vandal.sh"
            env { STATE = passthrough }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    env = runtime.unit_env(STATE=str(runtime.state))
    first = runtime.start("run", plan, "--format", "json", env=env)
    ran = runtime.root / "ran"
    eventually(ran.exists, "the unit to start")
    run_id = runtime.store().runs()[0].id
    second = runtime.start("run", run_id, env=env)
    deadline = time.monotonic() + 5
    while second.poll() is None and time.monotonic() < deadline and ran.read_text().count("ran") == 1:
        time.sleep(0.05)
    (runtime.root / "go").touch()
    second.communicate(timeout=120)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert ran.read_text().count("ran") == 1  # the second driver never ran the unit again
    if runtime.sqlite:
        assert second.returncode == 75


# -- property: nothing a unit prints wedges a run, on either store ----------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(st.characters(codec=None), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(st.characters(codec=None), max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
PRINTED = st.one_of(
    st.tuples(JSON_VALUES, st.booleans()).map(
        lambda v: json.dumps(v[0], ensure_ascii=v[1]).encode("utf-8", "surrogatepass")
    ),
    st.binary(max_size=40),
    st.lists(
        st.sampled_from([b'"', b"\\ud800", b"\\udfff", b"\\ud83d\\ude00", b"\\u0000", b"\x00", b"\xff", b"x"]),
        max_size=8,
    ).map(b"".join),
)
MAP_OF_EMITS = source("""
    workflow "t" {
      params { files: list[string] }
      step emit {
        map params.files {
          script "scripts/emit.py"
        }
        on_error = continue
      }
    }
""")


def outcome_of(printed: bytes) -> tuple[str, object]:
    """What a unit that prints `printed` (and exits 0) must end as: (status, stored output or reason)."""
    text = journal_text(printed)
    try:
        return "completed", strictjson.loads(text)
    except strictjson.NotStrict:
        return "failed", "output_invalid"
    except ValueError:
        return "completed", text.removesuffix("\n")


@pytest.mark.slow
@settings(
    max_examples=examples(10, at_least=2), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(outputs=st.lists(PRINTED, min_size=1, max_size=4))
def test_nothing_a_unit_prints_wedges_a_run_and_both_stores_keep_the_same(
    runtime: Runtime, outputs: list[bytes]
) -> None:
    runtime.write({"scripts/emit.py": EMIT})
    plan = runtime.root / "plans" / "wf.plan.json"
    if not plan.exists():
        runtime.compile("wf.akm", MAP_OF_EMITS)
    names = []
    for printed in outputs:
        name = f"out-{len(list(runtime.root.glob('out-*')))}.bin"
        (runtime.root / name).write_bytes(printed)
        names.append(name)
    code, document = runtime.run_json(plan, "--param", f"files={json.dumps(names)}")
    assert code == 0, document  # completed: each item completed or failed with a reason
    units = runtime.store().run_attempts(document["runId"])
    for (unit, attempts), printed in zip(units, outputs, strict=True):
        status, kept = outcome_of(printed)
        assert unit.status == status, (printed, unit)
        assert (unit.output if status == "completed" else unit.failure_reason) == kept, printed
        assert [a.status for a in attempts] == [status]
    again = runtime.akm("run", document["runId"])
    assert again.returncode == 0, again.stderr  # nothing left to do, nothing wedged
    assert runtime.akm("logs", document["runId"]).returncode == 0
    assert runtime.akm("status", document["runId"], "--format", "json").returncode == 0


def test_script_units_spawned_at_once_never_find_their_script_busy(runtime: Runtime) -> None:
    runtime.write({"scripts/emit.py": EMIT})
    names = []
    for index in range(48):
        (runtime.root / f"item-{index}.bin").write_bytes(str(index).encode())
        names.append(f"item-{index}.bin")
    plan = runtime.compile("wf.akm", MAP_OF_EMITS)
    code, document = runtime.run_json(plan, "--param", f"files={json.dumps(names)}", "--max-concurrency", "16")
    assert code == 0, document
    emit_step = runtime.store().step(document["runId"], "emit")
    assert emit_step is not None and emit_step.output == list(range(48))


@pytest.mark.parametrize(
    "vandalism",
    [
        'ln -sf /dev/zero "$lock"',
        'rm -f "$lock"; mkfifo "$lock"',
        'echo \'{"pid": "x", "host": 7}\' > "$lock"',
        "echo '[1, 2]' > \"$lock\"",
        'rm -rf "$state/locks"; echo not-a-directory > "$state/locks"',
    ],
    ids=["symlink-to-dev-zero", "fifo", "garbage-holder", "not-an-object", "locks-a-file"],
)
def test_whatever_a_unit_puts_in_place_of_its_lock_file_the_drive_ends(runtime: Runtime, vandalism: str) -> None:
    runtime.write(
        {
            "scripts/vandal.sh": source(f"""
                #!/bin/sh
                state=$(dirname "$(dirname "$(dirname "$AKM_CONTEXT")")")
                lock="$state/locks/$AKM_RUN_ID.lock"
                {vandalism}
                echo done
            """)
        }
    )
    src = source("""
        workflow "t" {
          step vandal {
            script "scripts/vandal.sh"
          }
          step wait {
            approval "ok?"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 3, document
    run_id = document["runId"]
    assert runtime.akm("status", run_id).returncode == 0
    approved = runtime.akm("approve", run_id, "wait", timeout=60)
    assert approved.returncode in (0, 75), approved.stderr
    if approved.returncode == 75:  # a holder file that names no one is stale after a few seconds
        approved = eventually(lambda: (r := runtime.akm("approve", run_id, "wait")).returncode == 0 and r, "approve")
    code, document = runtime.run_json(run_id)
    assert code == 0, document
