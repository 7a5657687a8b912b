"""Lowering on its own: a pure function of the checked model, its types and the files the load stage
froze. No file exists where these plans are built, so whatever a plan carries came from `Loaded`."""

from __future__ import annotations

from akmc import syntax
from akmc.diagnostics import Report
from akmc.load import Frozen, Loaded
from akmc.lower import lower
from akmc.resolve import Model, resolve
from akmc.typecheck import Typed, typecheck
from helpers import source

SOURCE = source("""
    workflow "w" {
      step build {
        script "scripts/build.sh"
      }
      step ask {
        agent file("prompts/ask.md")
      }
    }
""")
SCRIPT = Frozen("scripts/build.sh", "#!/bin/sh\nmake\n", "sha256:" + "a" * 64)
PROMPT = Frozen("prompts/ask.md", "Ask.\n", "sha256:" + "b" * 64)


def _checked(text: str) -> tuple[Model, Typed]:
    report = Report("w.akm")
    workflow = syntax.parse(text, report)
    assert workflow is not None
    model = resolve(workflow, report)
    typed = typecheck(model, report)
    assert report.diagnostics == []
    return model, typed


def test_the_plan_carries_the_frozen_files_and_lists_them_in_its_read_set() -> None:
    model, typed = _checked(SOURCE)
    loaded = Loaded({("script", "scripts/build.sh"): SCRIPT, ("file", "prompts/ask.md"): PROMPT})
    plan = lower(model, typed, loaded, ref="w")
    build, ask = plan["steps"][0], plan["steps"][1]
    assert build["kind"] == "unit" and ask["kind"] == "unit"
    script = {"kind": "script", "path": "scripts/build.sh", "sha256": SCRIPT.sha256, "text": SCRIPT.text}
    assert build["target"] == script
    assert ask["target"] == {"kind": "agent", "instructions": "Ask.\n", "path": "prompts/ask.md"}
    assert plan["sourceReadSet"] == [
        {"path": "prompts/ask.md", "sha256": PROMPT.sha256},
        {"path": "scripts/build.sh", "sha256": SCRIPT.sha256},
        {"path": "w.akm"},
    ]


def test_a_file_the_load_could_not_freeze_leaves_an_empty_target_and_no_read_entry() -> None:
    model, typed = _checked(SOURCE)
    plan = lower(model, typed, Loaded({("file", "prompts/ask.md"): PROMPT}), ref="w")
    build = plan["steps"][0]
    assert build["kind"] == "unit"
    assert build["target"] == {"kind": "script", "path": "scripts/build.sh", "sha256": "", "text": ""}
    assert [e["path"] for e in plan["sourceReadSet"]] == ["prompts/ask.md", "w.akm"]
    # the same frozen bytes under another name are another file: a script is never read as a prompt
    swapped = Loaded({("file", "scripts/build.sh"): SCRIPT, ("script", "prompts/ask.md"): PROMPT})
    assert lower(model, typed, swapped, ref="w")["sourceReadSet"] == [{"path": "w.akm"}]
