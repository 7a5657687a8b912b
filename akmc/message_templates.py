"""The typed templates of the diagnostic catalog (akmc.messages): a template per code wording, the
`Message` it renders, and the registry every template joins in the order it is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, NamedTuple, ParamSpec

P = ParamSpec("P")


class Message(NamedTuple):
    """One diagnostic's code and rendered words, before it has a place in a file."""

    template: Template[Any]
    text: str
    help: str | None = None

    @property
    def code(self) -> str:
        return self.template.code


class Template(Generic[P]):
    """One wording of a code: `str.format` templates for the message and its fixed help line."""

    __slots__ = ("code", "fields", "help", "text")

    def __init__(self, code: str, text: str, help: str | None, fields: Callable[P, None]) -> None:
        self.code, self.text, self.help, self.fields = code, text, help, fields

    def __call__(self, *args: P.args, **fields: P.kwargs) -> Message:
        assert not args, "message fields are named"
        help_text = self.help.format(**fields) if self.help is not None else None
        return Message(self, self.text.format(**fields), help_text)

    @property
    def name(self) -> str:
        return self.fields.__name__

    def __repr__(self) -> str:
        return f"<{self.code} {self.name}>"


REGISTRY: list[Template[Any]] = []  # every template, in the order below


def message(code: str, text: str, help: str | None = None) -> Callable[[Callable[P, None]], Template[P]]:
    """Register the decorated signature (its keyword-only parameters are the fields) as `code`'s template."""

    def register(fields: Callable[P, None]) -> Template[P]:
        template = Template(code, text, help, fields)
        REGISTRY.append(template)
        return template

    return register
