"""Typed message templates: what akm_run.wording registers each of akm-run's messages with.

A template is a `str.format` text whose keyword-only parameters are its fields, so mypy checks
every call. An `error` ends a command with its exit code and renders to a `Failure`; `words` are
the rest. REGISTRY holds every template in the order akm_run.wording defines them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, NamedTuple, ParamSpec

P = ParamSpec("P")


class Failure(NamedTuple):
    """What ends a command: the message said on stderr and the exit code it ends with."""

    text: str
    exit: int


class Template(Generic[P]):
    """One wording: a `str.format` template; `exit` is the exit code of an error, None for words."""

    __slots__ = ("exit", "fields", "text")

    def __init__(self, text: str, exit: int | None, fields: Callable[P, None]) -> None:
        self.text, self.exit, self.fields = text, exit, fields

    def render(self, **fields: Any) -> str:
        return self.text.format(**fields)

    @property
    def name(self) -> str:
        return self.fields.__name__

    def __repr__(self) -> str:
        return f"<{self.name}>"


class Words(Template[P]):
    """A reason, or a line a command prints: its text."""

    def __call__(self, *args: P.args, **fields: P.kwargs) -> str:
        assert not args, "message fields are named"
        return self.render(**fields)


class Error(Template[P]):
    """A message that ends a command with its exit code."""

    def __call__(self, *args: P.args, **fields: P.kwargs) -> Failure:
        assert not args, "message fields are named"
        assert self.exit is not None
        return Failure(self.render(**fields), self.exit)


REGISTRY: list[Template[Any]] = []  # every template, in the order below


def words(text: str) -> Callable[[Callable[P, None]], Words[P]]:
    """Register the decorated signature (its keyword-only parameters are the fields) as words."""

    def register(fields: Callable[P, None]) -> Words[P]:
        template = Words(text, None, fields)
        REGISTRY.append(template)
        return template

    return register


def error(exit: int, text: str) -> Callable[[Callable[P, None]], Error[P]]:
    """Register the decorated signature as an error that ends a command with `exit`."""

    def register(fields: Callable[P, None]) -> Error[P]:
        template = Error(text, exit, fields)
        REGISTRY.append(template)
        return template

    return register
