"""The diagnostic message registry: each template's fields are its parameters, every template is
reported somewhere, and rendering passes the user's words through unchanged."""

from __future__ import annotations

import inspect
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akmc import messages
from akmc.diagnostics import Report
from akmc.messages import REGISTRY, Template
from akmc.spans import Span
from helpers import REPO

AKMC = REPO / "akmc"
NAMES = [t.name for t in REGISTRY]
SPAN = Span(1, 1, 1, 2, 0, 1)


def _fields(template: Template[object]) -> set[str]:
    found = set()
    for text in (template.text, template.help or ""):
        found |= {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    return found


def test_names_are_unique_and_each_is_the_module_attribute() -> None:
    assert len(NAMES) == len(set(NAMES))
    for template in REGISTRY:
        assert getattr(messages, template.name) is template


@pytest.mark.parametrize("template", REGISTRY, ids=NAMES)
def test_template_fields_are_exactly_its_keyword_only_parameters(template: Template[object]) -> None:
    parameters = inspect.signature(template.fields).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)
    assert _fields(template) == {p.name for p in parameters}


@pytest.mark.parametrize("template", REGISTRY, ids=NAMES)
def test_every_template_is_reported_by_the_compiler(template: Template[object]) -> None:
    """A template nobody reports is dead wording: the registry holds only messages a user can see."""
    sources = [p.read_text(encoding="utf-8") for p in AKMC.rglob("*.py") if p.name != "messages.py"]
    assert any(f"messages.{template.name}" in text for text in sources)


def test_a_message_renders_its_template_and_fixed_help() -> None:
    message = messages.unbound_param(step="ship", child="lib/build", name="target", type="string")
    assert message.code == "E406"
    assert message.text == "step `ship` composes lib/build without binding its required param `target` (string)"
    assert message.help == "add `target = ...` to the bindings, or give the param a default in the child"


def test_report_prefers_the_help_given_where_it_is_reported() -> None:
    report = Report("wf.akm")
    report.add(messages.no_target(step="a"), SPAN)
    report.add(messages.no_target(step="b"), SPAN, help="did you mean `shell`?")
    report.add(messages.unknown_step(step="c", ref="steps.c.output"), SPAN)
    assert [d.help for d in report.diagnostics] == [
        messages.no_target.help,
        "did you mean `shell`?",
        None,
    ]
    assert [d.code for d in report.diagnostics] == ["E206", "E206", "E203"]


def test_braces_in_fixed_wording_are_literal() -> None:
    assert messages.retry_value().text == "`retry` takes an integer or `{ max = N, on = [...], backoff = D }`"


@given(st.text(), st.text())
def test_the_users_words_pass_through_verbatim(step: str, ref: str) -> None:
    """A field's value is never itself read as a template: braces, quotes and backslashes from a
    source come out as they went in."""
    assert messages.unknown_step(step=step, ref=ref).text == f"unknown step `{step}` in reference `{ref}`"
