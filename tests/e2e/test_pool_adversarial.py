"""The worker pool under attack: what a hostile command line, database URL or unit does to real
`akm-run worker` processes on a private PostgreSQL server (docs/scale-out.md). Each test failed
before the fix it came with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import Runtime

SECRET = "s3cr3t-PW"


def akm_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "akm_run", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


@pytest.mark.parametrize("spelling", ["&password=PW", "&pass%77ord=PW", "&PASSWORD=PW&sslmode=disable"])
def test_a_password_given_as_a_query_parameter_is_never_printed(
    database_url: str, tmp_path: Path, spelling: str
) -> None:
    # The database does not exist: every verb reports the unusable database, naming its URL.
    url = database_url.replace("/t_", "/missing_") + spelling.replace("PW", SECRET)
    plan = Runtime(tmp_path).compile("w.akm", 'workflow "w" {\n  step a {\n    shell "echo 1"\n  }\n}\n')
    for argv in (["status", "r1"], ["list"], ["worker"], ["run", str(plan), "--detach"], ["abandon", "r1"]):
        result = akm_run(*argv, "--database", url, cwd=tmp_path)
        assert result.returncode == 2, (argv, result.stderr)
        assert "***" in result.stderr, result.stderr
        assert SECRET not in result.stdout + result.stderr, argv


def test_a_malformed_url_with_a_query_password_is_refused_without_it(tmp_path: Path) -> None:
    result = akm_run("status", "r1", "--database", f"postgresql://ada@/akm?password={SECRET}&bogus=1", cwd=tmp_path)
    assert result.returncode == 2 and "malformed database URL" in result.stderr
    assert SECRET not in result.stderr


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--takeover-after", "999999999999h"], "at most 24h"),  # overflowed the heartbeat's timer
        (["--poll", "2m"], "at most 1m"),  # DBOS shares it: a long one starved every worker in the pool
        (["--grace", "100000h"], "at most 24h"),
        (["--takeover-after", "\u0663"], "invalid duration"),  # an Arabic-Indic three: not a number here
        (["--takeover-after", "\u00b2"], "invalid duration"),  # a superscript two
        (["--takeover-after", "0"], "at least 300ms"),
        (["--takeover-after", "-1"], "invalid duration"),
        (["--concurrency", "0"], "at least 1"),
        (["--executor-id", "a\nb"], "without spaces"),  # would split the worker's log lines
        (["--executor-id", "w 1"], "without spaces"),
        (["--executor-id", "w\udcff"], "without spaces"),  # bytes that are not UTF-8 (surrogate-escaped)
        (["--executor-id", "x" * 129], "at most 128"),
    ],
)
def test_a_worker_refuses_out_of_range_options_before_it_serves(
    database_url: str, tmp_path: Path, options: list[str], says: str
) -> None:
    result = akm_run("worker", "--database", database_url, *options, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr
    assert "serving" not in result.stderr


def test_a_worker_with_a_long_takeover_time_still_beats_often_enough_to_count_as_serving() -> None:
    from akm_run import pool

    worker = pool.Worker("postgresql://h/db", "w1", takeover_after_s=24 * 3600)
    assert worker.beat_s * 2 <= pool.SERVING_WITHIN_S  # else `run` warns that no worker serves
    assert pool.Worker("postgresql://h/db", "w1", takeover_after_s=3).beat_s == 1.0
