"""The wording of token budgets (akm_run.budgets, akm_run.units, operations.md D8): what a unit or a
run spent against its `max_tokens`. Part of the wording registry: akm_run.wording re-exports every
template here."""

from __future__ import annotations

from akm_run.exitcodes import USAGE
from akm_run.templates import error, words

__all__ = [
    "attempt_over_budget",
    "extra_tokens_below_one",
    "extra_tokens_beyond",
    "no_token_budget",
    "run_budget_spent",
    "tokens_of_limit",
    "tokens_raised",
    "tokens_spent",
    "unit_budget_spent",
    "unmetered",
]


@words("{what} reported {tokens} tokens, past the {left} left of its token budget (max_tokens); {stopped}")
def attempt_over_budget(*, what: str, tokens: int, left: int, stopped: str) -> None: ...
@words("the unit's token budget is spent: its attempts reported {spent} of its {limit} tokens (max_tokens)")
def unit_budget_spent(*, spent: str, limit: str) -> None: ...
@words(
    "the token budget of run {run} is spent: {spent} of {limit} tokens (max_tokens); "
    "raise it with `akm-run resume {run} --extra-tokens N`"
)
def run_budget_spent(*, run: str, spent: str, limit: str) -> None: ...
@words("tokens {spent} / {limit} ({percent}%)")
def tokens_of_limit(*, spent: str, limit: str, percent: int) -> None: ...
@words("tokens {spent}")
def tokens_spent(*, spent: str) -> None: ...
@words("agent units report no usage: max_tokens cannot bind")
def unmetered() -> None: ...
@words("raised the token allowance of run {run} by {extra}: {limit} tokens")
def tokens_raised(*, run: str, extra: str, limit: str) -> None: ...
@error(USAGE, "--extra-tokens must be 1 or more (got {extra})")
def extra_tokens_below_one(*, extra: int) -> None: ...
@error(
    USAGE, "--extra-tokens {extra} would raise run {run}'s allowance past {limit}, the largest integer akm-run keeps"
)
def extra_tokens_beyond(*, extra: int, run: str, limit: int) -> None: ...
@error(USAGE, "run {run} has no token budget (limits.max_tokens): --extra-tokens has nothing to raise")
def no_token_budget(*, run: str) -> None: ...
