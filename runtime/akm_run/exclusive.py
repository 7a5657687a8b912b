"""Exclusive runs (`limits { exclusive = … }`): a plan that says so is published only while no other
active or blocked top-level run holds its key, the ref or the ref and one param's value.

The check runs inside the publishing transaction, under a lock that serialises every publisher of
the ref: SQLite's write transaction (`BEGIN IMMEDIATE`) on one state database, a transaction-level
advisory lock on the shared PostgreSQL store. Two submitters racing cannot both pass. Child runs
are never checked: their parent already was."""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

from akm_run import wording
from akm_run.database import Database
from akm_run.hints import Hints
from akm_run.plan import canonical_bytes
from akm_run.wording import Failure


class RunInTheWay(Exception):
    """An unsettled top-level run already holds the plan's exclusive key."""

    def __init__(self, run_id: str, status: str, param: str | None, value: Any) -> None:
        super().__init__(run_id)
        self.run_id, self.status, self.param, self.value = run_id, status, param, value


def in_the_way(way: RunInTheWay, ref: str, hints: Hints) -> Failure:
    """The refusal of `run PLAN`: the run in the way, and the commands to continue it or drop it."""
    key = "" if way.param is None else f" ({way.param} = {json.dumps(way.value, ensure_ascii=False)})"
    go_on, drop = hints("run", way.run_id), hints("abandon", way.run_id)
    return wording.run_in_the_way(ref=ref, key=key, run=way.run_id, status=way.status, go_on=go_on, drop=drop)


def key_param(plan: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(whether the plan is exclusive, the param whose value is part of its key)."""
    exclusive = plan.get("limits", {}).get("exclusive")  # the store's own tests publish bare plans
    if exclusive is None:
        return False, None
    return True, exclusive["param"] if isinstance(exclusive, dict) else None


class Exclusion(Database):
    """The check, on a store's journal."""

    def refuse_second_run(self, plan: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        """Inside the publishing transaction: raise RunInTheWay when an active or blocked top-level
        run of the plan's ref (with the same value of its key param) exists. Nothing for a plan
        that is not exclusive."""
        exclusive, param = key_param(plan)
        if not exclusive:
            return
        self._serialise_publishers(plan["ref"])
        value = params.get(param) if param is not None else None
        rows = self._execute(
            "SELECT id, status, params_json FROM runs WHERE parent_run_id IS NULL AND ref = ? "
            "AND status IN ('active', 'blocked') ORDER BY created_at, id",
            (plan["ref"],),
        ).fetchall()
        for run_id, status, params_json in rows:
            if param is None or _same(json.loads(params_json).get(param), value):
                raise RunInTheWay(str(run_id), str(status), param, value)
        from akm_run.children import hold  # the engine's modules: only for an exclusive plan

        hold("exclusive")  # race testing: between the check and the commit

    @abstractmethod
    def _serialise_publishers(self, ref: str) -> None:
        """Inside a transaction: wait until no other publisher of `ref` is between its check and
        its commit."""


def _same(a: Any, b: Any) -> bool:
    """Equal as the plan's values are (canonical JSON: `1` and `1.0` are one number)."""
    return canonical_bytes(a) == canonical_bytes(b)
