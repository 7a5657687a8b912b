"""The journal's token accounts (operations.md D8): what a run and everything it composes spent,
what `resume --extra-tokens` added, and each run's frozen limits (read once per run)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from akm_run.budgets import tokens_of
from akm_run.planformat import MAX_INT
from akm_run.queries import Queries


class Tokens(Queries):
    def event(
        self, run_id: str, kind: str, step_id: str | None = None, unit_id: str | None = None, **data: Any
    ) -> None:
        raise NotImplementedError  # akm_run.store.Store's

    def token_account(self, run_id: str) -> tuple[str | None, int, int] | None:
        """(parent run id, tokens spent, tokens raised) of a run; None when it is gone."""
        row = self._execute(
            "SELECT parent_run_id, tokens_spent, tokens_raised FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
        return None if row is None else (row[0], int(row[1]), int(row[2]))

    def run_limits(self, run_id: str) -> Mapping[str, Any]:
        """A run's `limits` (frozen with its plan): kept once read."""
        cache: dict[str, Mapping[str, Any]] = self.__dict__.setdefault("_limits_cache", {})
        if run_id not in cache:
            row = self._execute("SELECT plan_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            cache[run_id] = {} if row is None else json.loads(row[0])["limits"]
        return cache[run_id]

    def _spend(self, run_id: str, usage: Mapping[str, Any] | None) -> None:
        """Inside the caller's transaction (an attempt's end): add its tokens to its run and every
        ancestor, so a crash after the attempt ended cannot lose or double them."""
        tokens = min(tokens_of(usage), MAX_INT)
        current: str | None = run_id
        while tokens and current is not None:  # held at 2^53 - 1, which every store keeps exactly
            self._execute(
                "UPDATE runs SET tokens_spent = CASE WHEN tokens_spent > ? THEN ? ELSE tokens_spent + ? END WHERE id = ?",
                (MAX_INT - tokens, MAX_INT, tokens, current),
            )
            row = self._execute("SELECT parent_run_id FROM runs WHERE id = ?", (current,)).fetchone()
            current = None if row is None else row[0]

    def _usage(self, run_id: str, unit_id: str, attempt: int, usage: Mapping[str, Any] | None) -> None:
        if usage is None:
            return
        self._execute(
            "UPDATE attempts SET usage_json = ? WHERE run_id = ? AND unit_id = ? AND attempt = ?",
            (json.dumps(usage, sort_keys=True, ensure_ascii=False), run_id, unit_id, attempt),
        )
        self._spend(run_id, usage)

    def raise_tokens(self, run_id: str, extra: int, by: str) -> None:
        """`resume --extra-tokens`: add to the run's allowance, audited with who did it."""
        with self.transaction():
            self._execute("UPDATE runs SET tokens_raised = tokens_raised + ? WHERE id = ?", (extra, run_id))
            self.event(run_id, "budget.raised", by=by, extra=extra)

    def exceed_budget(self, run_id: str, step_id: str, unit_id: str, **data: Any) -> None:
        """A token budget refused a unit before dispatch (`budget`: "unit" or the run whose budget
        is spent) or ended an attempt past it (`attempt`); the hook of D4's `budget` notification."""
        self.event(run_id, "budget.exceeded", step_id, unit_id, **data)

    def unmetered(self, run_id: str, step_id: str, unit_id: str) -> None:
        """An agent unit under a budget reported no usage: once per step."""
        with self.transaction(durable=False):
            if not self.has_event(run_id, "budget.unmetered", step_id):
                self.event(run_id, "budget.unmetered", step_id, unit_id)

    def has_event(self, run_id: str, kind: str, step_id: str | None = None) -> bool:
        """Whether the run has an event of this kind (of this step, when one is named)."""
        row = self._execute(
            "SELECT 1 FROM events WHERE run_id = ? AND kind = ? AND (CAST(? AS TEXT) IS NULL OR step_id = ?) LIMIT 1",
            (run_id, kind, step_id, step_id),
        ).fetchone()
        return row is not None
