"""The load stage on real files: what a plan freezes is read once, and each problem is reported
wherever the source names the file, in the order the plan holds what names it."""

from __future__ import annotations

from pathlib import Path

from akm_run.digest import tagged_sha256
from akmc import load, syntax
from akmc.diagnostics import Report
from akmc.resolve import resolve
from helpers import source

TOKEN = "ghp_" + "A1b2C3d4" * 5

SOURCE = source("""
    workflow "w" {
      description = file("prompts/about.md")
      step first {
        script "scripts/missing.sh"
        env {
          KEY = "TOKEN"
        }
      }
      step second {
        script "scripts/missing.sh"
        gate {
          check shell "test -f done"
        }
      }
      step ask {
        agent file("prompts/ask.md")
      }
    }
""").replace('"TOKEN"', f'"{TOKEN}"')


def _load(root: Path) -> tuple[load.Loaded, load.ReadSet, Report]:
    report = Report("w.akm")
    workflow = syntax.parse(SOURCE, report)
    assert workflow is not None
    model = resolve(workflow, report)
    assert report.diagnostics == []
    reads = load.ReadSet()
    return load.workspace_files(model, root, report, reads), reads, report


def test_each_file_is_frozen_once_and_each_problem_reported_where_it_is_named(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "about.md").write_text("About.\n")
    (tmp_path / "prompts" / "ask.md").write_text(f"Use {TOKEN}.\n")
    loaded, reads, report = _load(tmp_path)
    found = [(d.code, d.span.line) for d in report.diagnostics]
    # the plan's order: the description, then each work step's target, gate check and env
    assert found == [("E500", 4), ("E600", 6), ("E500", 10), ("E600", 16)]
    assert "the prompt" in report.diagnostics[-1].message
    assert sorted(loaded.files) == [("file", "prompts/about.md"), ("file", "prompts/ask.md")]
    assert loaded.files[("file", "prompts/ask.md")].text == f"Use {TOKEN}.\n"
    assert reads.probed == {
        "prompts/about.md": tagged_sha256(b"About.\n"),
        "scripts/missing.sh": None,  # looked at once, absent: a cached result sees it appear
        "prompts/ask.md": tagged_sha256(f"Use {TOKEN}.\n".encode()),
    }
