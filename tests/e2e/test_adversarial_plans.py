"""A hostile unit that rewrites the stored plans of every other run while a map of child runs runs:
the texts an engine verified once (storedplans.VerifiedPlans) never let a rewritten one run."""

from __future__ import annotations

import pytest

from akm_run.sqlitestore import DB_NAME
from helpers import Runtime, doubling_leaf, source

TAMPER = """import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=30)
with db:
    db.execute(
        "UPDATE runs SET plan_json = replace(plan_json, 'echo MARK', 'echo EVIL') "
        "WHERE id != ?",
        (os.environ["AKM_RUN_ID"],),
    )
"""


@pytest.mark.sqlite_only  # a unit reaches the journal's file; a worker's database is the pool's
def test_plans_rewritten_by_a_child_unit_between_two_child_runs_never_run(runtime: Runtime) -> None:
    database = runtime.state / DB_NAME
    log = f"echo MARK >> log; [ -e tampered ] || {{ touch tampered; python3 scripts/tamper.py {database}; }}"
    runtime.write({"workflows/leaf.akm": doubling_leaf(log), "scripts/tamper.py": TAMPER})
    src = source("""
        workflow "p" {
          params {
            items: list[int] = [1, 2, 3, 4]
          }
          step fan {
            map params.items {
              concurrency = 1
              uses "workflows/leaf" { n = item }
            }
          }
        }
    """)
    _, document = runtime.run_json(runtime.compile("workflows/p.akm", src))
    assert runtime.sql("SELECT id FROM runs WHERE plan_json LIKE '%echo EVIL%'"), "nothing was rewritten"
    assert (runtime.root / "log").read_text().split() == ["MARK"] * 4, document
