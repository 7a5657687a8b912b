"""The third edition's first rule (docs/plan-format.md, "Features"): a plan that uses nothing new
does not change. Every workflow of the second edition's golden corpus, examples and compositions
compiles to the plan hash it had before the third edition, pinned in
tests/data/second-edition-plan-hashes.json. Unlike the golden snapshots, this file is never
updated: a change here means an unchanged source changed its plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from akm_run.plan import plan_hash
from akmc.compiler import Session
from akmc.workspace import discover
from helpers import REPO

PINNED: dict[str, str] = json.loads((REPO / "tests" / "data" / "second-edition-plan-hashes.json").read_text())
ROOTS = sorted({key.split(":")[0] for key in PINNED})


@pytest.mark.parametrize("root", ROOTS)
def test_second_edition_plans_keep_their_hashes(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO / root)
    session = Session(REPO / root)
    for path in discover([Path("workflows")]):
        session.check(path)
    compiled = {f"{root}:{r.ref}": plan_hash(r.plan) for r in session.results if r.plan is not None}
    pinned = {key: value for key, value in PINNED.items() if key.startswith(f"{root}:")}
    assert {key: compiled.get(key) for key in pinned} == pinned
