"""`--database` / $AKM_RUN_DATABASE on every command, with the real `akm-run`: the plain runtime never
imports DBOS or psycopg, and a URL it cannot serve is a usage error that says why."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from akm_run.cli import build_parser

# Runs in a fresh interpreter where the extra's modules cannot be imported, as without the extra:
# imports every module of the runtime (those of the shared store must fail, naming what is missing),
# then runs `akm-run ARGV`, and reports what was loaded.
WITHOUT_EXTRA = """
import importlib, json, pkgutil, sys
import akm_run

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("dbos", "psycopg", "psycopg_binary", "sqlalchemy"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
NEEDS_EXTRA = {"akm_run.pool", "akm_run.pgstore", "akm_run.drives", "akm_run.drive_lock", "akm_run.stopping",
               "akm_run.pool_schemas", "akm_run.submitting", "akm_run.wakes"}
modules = sorted(m.name for m in pkgutil.walk_packages(akm_run.__path__, "akm_run."))
for name in modules:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as error:  # allowed only to the shared store's own modules
        assert name in NEEDS_EXTRA and error.name in ("dbos", "psycopg"), (name, error)
    else:
        assert name not in NEEDS_EXTRA, name
from akm_run.cli import main
try:
    code = main(json.loads(sys.argv[1]))
finally:
    loaded = sorted({m.partition(".")[0] for m in sys.modules} & {"dbos", "psycopg", "sqlalchemy"})
    print(json.dumps({"modules": modules, "loaded": loaded}))
sys.exit(code)
"""


def without_extra(
    *argv: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AKM_")}
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, json.dumps(argv)],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=120,
    )
    return result, json.loads(result.stdout.splitlines()[-1])


def test_every_module_of_the_plain_runtime_imports_without_the_extra_and_pulls_in_neither(tmp_path: Path) -> None:
    result, seen = without_extra("list", "--state-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "akm_run.database_url" in seen["modules"] and "akm_run.cli" in seen["modules"]
    assert seen["loaded"] == []


@pytest.mark.parametrize("via", ["option", "environment"])
def test_a_postgres_url_without_the_extra_is_a_usage_error_naming_it(via: str) -> None:
    url = "postgresql://ada:hunter2@db.example/akm"
    args, env = (("--database", url), {}) if via == "option" else ((), {"AKM_RUN_DATABASE": url})
    result, seen = without_extra("status", "20261130T101500-3fa9c2d1", *args, env=env)
    assert result.returncode == 2
    assert "pip install 'akm-run[postgres]'" in result.stderr and "dbos, psycopg not installed" in result.stderr
    assert "hunter2" not in result.stderr and "Traceback" not in result.stderr
    assert seen["loaded"] == []


def test_every_store_command_takes_database() -> None:
    parser = build_parser()
    verbs = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    takes = {name for name, sub in verbs.items() if "--database" in sub._option_string_actions}
    assert takes == set(verbs) - {"completion"}


def run_akm(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AKM_")}
    return subprocess.run(
        [sys.executable, "-m", "akm_run", *argv],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=120,
    )


def test_an_unsupported_scheme_is_a_usage_error_on_every_command() -> None:
    for argv in (["list"], ["status", "x"], ["abandon", "x"], ["verify", "nothing.plan.json"]):
        result = run_akm(*argv, "--database", "mysql://db.example/akm")
        assert result.returncode == 2 and "unsupported database URL mysql://db.example/akm" in result.stderr


def test_the_environment_selects_the_store_and_an_empty_one_keeps_sqlite(tmp_path: Path) -> None:
    refused = run_akm("list", env={"AKM_RUN_DATABASE": "sqlite:///state.db"})
    assert refused.returncode == 2 and "unsupported database URL sqlite:///state.db" in refused.stderr
    kept = run_akm("list", "--state-dir", str(tmp_path), env={"AKM_RUN_DATABASE": ""})
    assert kept.returncode == 0 and kept.stdout == "no runs\n"


def test_state_dir_and_database_together_are_a_usage_error(tmp_path: Path) -> None:
    result = run_akm("list", "--state-dir", str(tmp_path), "--database", "postgresql://db.example/akm")
    assert result.returncode == 2 and "--state-dir and --database" in result.stderr
    assert not tmp_path.joinpath("state.db").exists()
