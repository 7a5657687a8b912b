"""Token budgets (operations.md D8): the usage an agent reports on its `AKM_PROGRESS` file, and the
budget left for a unit.

The channel is shared with activity frames and pulses (D6); `usage_of` is the one place that
decides what a usage line is, and `UsageReader` the one place that reads the file for them. The
tokens counted are `input_tokens + output_tokens`; `cost_usd` and other fields are stored and shown,
never budgeted. The last usage line of an attempt wins (the report is cumulative)."""

from __future__ import annotations

import getpass
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from akm_run import console, wording
from akm_run.journal import Journal
from akm_run.planformat import MAX_INT
from akm_run.progressfile import Follower
from akm_run.rows import RunRow
from akm_run.usagelines import MARKS
from akm_run.usagelines import MAX_LINE_BYTES as MAX_LINE_BYTES
from akm_run.usagelines import Usage as Usage
from akm_run.usagelines import usage_of as usage_of


def tokens_of(usage: Mapping[str, Any] | None) -> int:
    """The tokens a stored usage report counts (0 for none)."""
    return 0 if usage is None else int(usage["input_tokens"]) + int(usage["output_tokens"])


class UsageReader:
    """The usage lines of a unit's progress file, followed as akm_run.progressfile follows it (the
    activity channel's reader), keeping the last usage. The file belongs to the unit: it may be
    removed, replaced, truncated, replaced by a FIFO or a link, or grow without end; none of that
    blocks or breaks the reader (a non-regular file reads as nothing)."""

    def __init__(self, path: Path) -> None:
        self.last: Usage | None = None
        self._since = 0  # the offset past the last usage line found in the file followed now
        self._file = Follower(path, leaving=self._leaving)

    def look(self) -> Usage | None:
        """Read the new complete lines (a backlog skipped to its newest window: the last usage
        line wins); the last usage reported so far."""
        for line, end in self._file.read():
            found = usage_of(line.strip())
            if found is not None:
                self.last, self._since = found, end
        return self.last

    def finish(self) -> Usage | None:
        """After the unit ended: its last usage line, however much it wrote before or after it, a
        last line without its newline included; the file is closed."""
        self.look()
        self._scan()
        self.close()
        return self.last

    def close(self) -> None:
        self._file.close()

    def _scan(self) -> None:
        """The last usage line past the one found already, read backwards from the file's end."""
        line = self._file.last_line(lambda raw: usage_of(raw.strip()) is not None, self._since, MARKS)
        if line is not None:
            self.last = usage_of(line.strip())

    def _leaving(self) -> None:
        """The unit replaced or truncated the file: what the one left holds past the last usage
        line found counts first; the next file is read from its start."""
        self._scan()
        self._since = 0


class Accounts(Protocol):
    """What the budget arithmetic reads from the journal."""

    def token_account(self, run_id: str) -> tuple[str | None, int, int] | None:
        """(parent run id, tokens spent, tokens raised) of a run; None when it is gone."""
        ...

    def run_limits(self, run_id: str) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Left:
    """The smallest budget left over a unit, its step and every run above it; `which` names it."""

    tokens: int
    which: str  # "unit" or a run id
    limit: int  # that budget's allowance (a run's with its raises)


def remaining(accounts: Accounts, run_id: str, step_limit: int | None, unit_spent: int) -> Left | None:
    """What is left of every budget over a unit (its step's `maxTokens` less what its attempts
    reported, each run's `limits.maxTokens` plus its raises less its tree's spend): the smallest,
    or None when no budget applies."""
    found: list[Left] = [] if step_limit is None else [Left(step_limit - unit_spent, "unit", step_limit)]
    current: str | None = run_id
    while current is not None:
        account = accounts.token_account(current)
        if account is None:
            break
        parent, spent, raised = account
        limit = accounts.run_limits(current).get("maxTokens")
        if limit is not None:
            found.append(Left(limit + raised - spent, current, limit + raised))
        current = parent
    return min(found, key=lambda left: left.tokens) if found else None


def stored(usage: Usage | None) -> str | None:
    """A usage report as `attempts.usage_json` keeps it."""
    return None if usage is None else json.dumps(usage.fields, sort_keys=True, ensure_ascii=False)


def raised(journal: Journal, run: RunRow, extra: int, by: str | None) -> wording.Failure | None:
    """`resume --extra-tokens N [--by NAME]`: add N to the run's allowance, audited as
    `budget.raised`, and say so; the refusal when N is below 1, NAME is not text or the run has
    no token budget (nothing changes then)."""
    who = by or getpass.getuser()
    if extra < 1:
        return wording.extra_tokens_below_one(extra=extra)
    if not console.utf8(who):
        return wording.user_not_text(name=console.as_given(who))
    limit = journal.run_limits(run.id).get("maxTokens")
    if limit is None:
        return wording.no_token_budget(run=run.id)
    before = journal.token_account(run.id)
    if limit + (before[2] if before else 0) + extra > MAX_INT:  # a store's integer keeps it exactly
        return wording.extra_tokens_beyond(extra=extra, run=run.id, limit=MAX_INT)
    journal.raise_tokens(run.id, extra, who)
    account = journal.token_account(run.id)
    allowance = limit + (account[2] if account else extra)
    print(wording.tokens_raised(run=run.id, extra=f"{extra:,}", limit=f"{allowance:,}"))
    return None


def run_usage(journal: Journal, run: RunRow) -> dict[str, Any] | None:
    """`status`'s `run.usage`: the tokens the run's tree spent, its allowance (`limit`, with what
    `resume --extra-tokens` added) and `unmetered` when an agent unit under a budget reported none.
    None for a run with no budget and no spend."""
    limit = journal.run_limits(run.id).get("maxTokens")
    if limit is None and not run.tokens_spent:
        return None
    usage: dict[str, Any] = {"tokens": run.tokens_spent}
    if limit is not None:
        usage["limit"] = limit + run.tokens_raised
    if run.tokens_raised:
        usage["raised"] = run.tokens_raised
    if journal.has_event(run.id, "budget.unmetered"):
        usage["unmetered"] = True
    return usage


def usage_lines(usage: Mapping[str, Any]) -> list[str]:
    """`status`'s lines for `run.usage`: `tokens 1,234,567 / 2,000,000 (62%)`, and the warning."""
    spent = f"{usage['tokens']:,}"
    if "limit" in usage:
        percent = usage["tokens"] * 100 // usage["limit"]
        lines = [wording.tokens_of_limit(spent=spent, limit=f"{usage['limit']:,}", percent=percent)]
    else:
        lines = [wording.tokens_spent(spent=spent)]
    return lines + ([f"warning: {wording.unmetered()}"] if usage.get("unmetered") else [])


def attempt_usage_line(usage: Mapping[str, Any]) -> str:
    """`logs`' line for an attempt's usage: the tokens counted, then every field as reported."""
    fields = ", ".join(f"{key} {json.dumps(value, ensure_ascii=False)}" for key, value in sorted(usage.items()))
    return f"usage: {tokens_of(usage):,} tokens ({fields})"
