"""The language server's analysis of a file, in process: what the session's compile left, read back
for hover, definition and completion."""

from __future__ import annotations

from pathlib import Path

from akmc import types as t
from akmc.compiler import Session
from akmc.lsp import navigate
from akmc.lsp.analysis import check
from helpers import source

A = source("""
    workflow "a" {
      step s {
        shell "echo"
        output: string
      }
      step b {
        uses "workflows/b"
      }
    }
""")
B = source("""
    workflow "b" {
      step a {
        uses "workflows/a"
      }
    }
""")


def test_the_analysis_is_the_sessions_compile_and_a_cycle_still_leads_to_its_file(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "a.akm").write_text(A)
    (tmp_path / "workflows" / "b.akm").write_text(B)
    path = (tmp_path / "workflows" / "b.akm").resolve()
    analysis = check(path, {}).analysis
    assert [d.code for d in analysis.diagnostics] == ["E401"]
    compiled = Session(tmp_path).check(path)  # the types hover shows are those the checker settled on
    assert analysis.typed is not None and compiled.typed is not None
    assert analysis.typed.steps == compiled.typed.steps == {"a": t.ANY}
    # the composition is refused, yet `uses "workflows/a"` still names a file to go to
    assert navigate.definition(analysis, B.index('"workflows/a"') + 2) == (tmp_path / "workflows" / "a.akm", None)
