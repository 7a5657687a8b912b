"""Hostile units against the scratch directory that the child runs a drive drives inline share with
it (units.Scratch, docs/runtime.md, "The state directory")."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import Runtime, doubling_leaf, source

# The first child run's unit removes the directory of its own files, as a careless
# `rm -rf "$(dirname "$AKM_CONTEXT")"` would; the other units leave it alone.
CLEANER = '[ -e cleaned ] || { touch cleaned; rm -rf \\"$(dirname \\"$AKM_CONTEXT\\")\\"; }'


@pytest.mark.sqlite_only  # on the pool each attempt's files are the worker's, in a directory of their own
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


@pytest.mark.sqlite_only  # on the pool each attempt's files are the worker's, in a directory of their own
def test_a_unit_replacing_its_directory_with_a_link_fails_no_later_step_and_is_not_followed(runtime: Runtime) -> None:
    """The next attempt makes the directory again, private, instead of writing its context through
    the link (which a unit of the same user could point anywhere) or failing the drive."""
    (runtime.root / "elsewhere").mkdir()
    src = source("""
        workflow "p" {
          step one {
            shell "d=\\"$(dirname \\"$AKM_CONTEXT\\")\\"; rm -rf \\"$d\\"; ln -s \\"$PWD/elsewhere\\" \\"$d\\""
          }
          step two {
            shell "dirname \\"$AKM_CONTEXT\\" > two; [ ! -L \\"$(dirname \\"$AKM_CONTEXT\\")\\" ]"
          }
        }
    """)
    code, document = runtime.run_json(runtime.compile("workflows/p.akm", src))
    assert (code, document["status"]) == (0, "completed"), document
    assert list((runtime.root / "elsewhere").iterdir()) == []
    assert Path((runtime.root / "two").read_text().strip()).name.startswith(f"{document['runId']}.")
