"""Hostile units against the scratch directory that the child runs a drive drives inline share with
it (units.Scratch, docs/runtime.md, "The state directory")."""

from __future__ import annotations

import pytest

from helpers import Runtime, doubling_leaf, source

# The first child run's unit removes the directory of its own files, as a careless
# `rm -rf "$(dirname "$AKM_CONTEXT")"` would; the other units leave it alone.
CLEANER = '[ -e cleaned ] || { touch cleaned; rm -rf \\"$(dirname \\"$AKM_CONTEXT\\")\\"; }'


@pytest.mark.sqlite_only  # on the pool each attempt's files are the worker's, in a directory of their own
@pytest.mark.xfail(
    strict=True,
    reason="units.Scratch keeps the root drive's directory for every child run it drives: once a child's "
    "unit removed it, each later child run's drive fails with FileNotFoundError (a private directory "
    "per child run, as before, kept the harm to that child)",
)
def test_a_child_unit_removing_its_directory_does_not_fail_the_later_child_runs(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": doubling_leaf(CLEANER)})
    src = source("""
        workflow "p" {
          params {
            items: list[int] = [1, 2, 3]
          }
          step fan {
            map params.items {
              concurrency = 1
              uses "workflows/leaf" { n = item }
            }
          }
        }
    """)
    code, document = runtime.run_json(runtime.compile("workflows/p.akm", src))
    assert (code, document["status"]) == (0, "completed"), document
