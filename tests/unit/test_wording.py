"""akm-run's wording registry: each template's fields are its parameters, every template is used by
the runtime, every error ends with a documented exit code, and docs/runtime-messages.md lists them."""

from __future__ import annotations

import inspect
import re
import string
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akm_run import exitcodes, wording
from akm_run.wording import REGISTRY, Error, Failure, Template, Words
from helpers import REPO, repository_module

RUNTIME = REPO / "runtime" / "akm_run"
NAMES = [t.name for t in REGISTRY]


def _fields(template: Template[object]) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template.text) if name is not None}


def _docs_hooks() -> ModuleType:
    return repository_module("docs_hooks")


def test_names_are_unique_and_each_is_the_module_attribute() -> None:
    assert len(NAMES) == len(set(NAMES))
    for template in REGISTRY:
        assert getattr(wording, template.name) is template


@pytest.mark.parametrize("template", REGISTRY, ids=NAMES)
def test_template_fields_are_exactly_its_keyword_only_parameters(template: Template[object]) -> None:
    parameters = inspect.signature(template.fields).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)
    assert _fields(template) == {p.name for p in parameters}


@pytest.mark.parametrize("template", REGISTRY, ids=NAMES)
def test_every_template_is_used_by_the_runtime(template: Template[object]) -> None:
    """A template nothing uses is dead wording: the registry holds only what akm-run can say."""
    sources = [p.read_text(encoding="utf-8") for p in RUNTIME.glob("*.py") if p.name != "wording.py"]
    used = re.compile(rf"\bwording\.{template.name}\b")
    assert any(used.search(text) for text in sources)


def test_errors_carry_an_exit_code_and_words_none() -> None:
    for template in REGISTRY:
        assert isinstance(template, Error | Words)
        assert (template.exit is not None) == isinstance(template, Error), template


def test_every_error_ends_with_an_exit_code_of_the_documented_table() -> None:
    """docs/runtime.md's exit code table is the list a message may end with (never 0, nor the
    codes a run's result decides: 1 failed, 3 blocked, 130 interrupted)."""
    page = (REPO / "docs" / "runtime.md").read_text(encoding="utf-8")
    table = page.split("| code | meaning |", 1)[1].split("\n\n", 1)[0]
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", table, re.M)}
    results = {exitcodes.COMPLETED, exitcodes.FAILED, exitcodes.BLOCKED, exitcodes.INTERRUPTED}
    ends = {t.exit for t in REGISTRY if t.exit is not None}
    assert ends <= documented - results


def test_the_messages_page_lists_every_template_as_the_registry_words_it() -> None:
    """docs/runtime-messages.md is generated (`python3 docs_hooks.py` rewrites it; the site's build
    refuses a stale one): every error under its exit code, then every reason."""
    hooks = _docs_hooks()
    page = (REPO / "docs" / "runtime-messages.md").read_text(encoding="utf-8")
    assert page == hooks.runtime_messages()
    sections = re.split(r"^## ", page, flags=re.M)[1:]
    by_heading = {section.split("\n", 1)[0]: section for section in sections}
    for template in REGISTRY:
        heading = "Reasons" if template.exit is None else f"Exit {template.exit}"
        assert hooks._listed(template) in by_heading[heading].splitlines(), template


def test_an_error_renders_its_text_and_exit_code() -> None:
    failure = wording.no_step(run="R", step="ship", steps="build, test")
    assert failure == Failure("run R has no step 'ship' (its steps: build, test)", exitcodes.USAGE)
    assert wording.being_driven(held=RuntimeError("run R is locked")).exit == exitcodes.LOCKED
    assert wording.refused_plan_file(path="p.json", error=ValueError("file: not JSON")).exit == exitcodes.REFUSED


def test_words_render_to_text() -> None:
    assert wording.param_required(name="version") == "param version is required (pass --param version=VALUE)"
    assert wording.no_match(value='"x"', pattern="[a-z]+[0-9]") == '"x" does not match [a-z]+[0-9]'


@given(st.text(), st.text())
def test_the_users_words_pass_through_verbatim(run: str, where: str) -> None:
    """A field's value is never itself read as a template: braces, quotes and backslashes from a
    command line or a plan come out as they went in."""
    assert wording.no_run(run=run, where=where).text == f"no run named {run!r} ({where})"
    assert wording.reopened(run=run, steps=where) == f"reopened run {run}: {where} pending again"
