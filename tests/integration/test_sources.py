"""SourceFile names a file once; a ref becomes a path in one place; the Reader lets an editor's
buffer stand in for a file on disk, wherever the session reads it."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from akmc.compiler import Session
from akmc.sources import Reader, SourceFile, decode_source, ref_file
from akmc.workspace import MAX_SOURCE_BYTES, SourceError, relative_to
from profiles import examples

CHILD = textwrap.dedent("""\
    workflow "child" {
      outputs {
        notes = steps.write.output
      }
      step write {
        shell "echo notes"
      }
    }
    """)
PARENT = textwrap.dedent("""\
    workflow "parent" {
      step build {
        uses "lib/child"
      }
      step after {
        shell "echo"
        inputs = [steps.build.output.notes]
      }
    }
    """)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "child.akm").write_text(CHILD)
    (tmp_path / "parent.akm").write_text(PARENT)
    return tmp_path.resolve()


def test_a_source_is_named_once_from_its_resolved_path(root: Path) -> None:
    os.symlink(root / "lib" / "child.akm", root / "alias.akm")
    source = SourceFile.at(root / "alias.akm", root, "alias.akm")
    assert source.path == root / "lib" / "child.akm"
    assert (source.relative, source.ref, source.display) == ("lib/child.akm", "lib/child", "alias.akm")


def test_a_source_outside_the_root_has_no_relative_path_and_its_stem_as_ref(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "loose.akm"
    elsewhere.write_text(CHILD)
    source = SourceFile.at(elsewhere, root, "loose.akm")
    assert (source.relative, source.ref) == (None, "loose")


def test_a_name_that_starts_with_two_dots_is_still_inside_the_root(root: Path) -> None:
    assert relative_to(root / "..hidden.akm", root) == "..hidden.akm"
    assert relative_to(root.parent / "x.akm", root) is None


def test_a_ref_names_one_file(root: Path) -> None:
    assert ref_file(root, "lib/child") == root / "lib" / "child.akm"


def test_decoding_strips_a_byte_order_mark_and_refuses_what_is_not_utf8() -> None:
    assert decode_source("\ufeffworkflow".encode()) == "workflow"
    problem = decode_source(b"ok \xff")
    assert not isinstance(problem, str)
    assert (problem.code, problem.text) == ("E103", "file is not valid UTF-8: invalid byte 0xff at offset 3")
    too_big = decode_source(b"#" * (MAX_SOURCE_BYTES + 1))
    assert not isinstance(too_big, str) and too_big.code == "E103"


def test_the_disk_reader_names_an_unreadable_file_by_its_display_name(root: Path) -> None:
    missing = SourceFile(root / "gone.akm", root, "gone.akm", "shown/gone.akm")
    with pytest.raises(SourceError, match=r"shown/gone\.akm"):
        Reader().read(missing)


def test_an_open_buffer_stands_in_for_the_file_on_disk(root: Path) -> None:
    (root / "parent.akm").write_text("workflow {")  # the saved file has a syntax error
    reader = Reader({root / "parent.akm": PARENT})
    result = Session(root, reader=reader).check(root / "parent.akm")
    assert result.report.diagnostics == []
    assert result.plan is not None


def test_a_child_buffer_changes_what_its_parent_sees(root: Path) -> None:
    """An edit to a child that is still only in the editor breaks the parent that reads its output."""
    renamed = CHILD.replace("notes = steps", "summary = steps")
    result = Session(root, reader=Reader({root / "lib" / "child.akm": renamed})).check(root / "parent.akm")
    assert [d.code for d in result.report.diagnostics] == ["E407"]
    assert Session(root).check(root / "parent.akm").report.diagnostics == []


def test_a_buffer_not_yet_saved_can_be_composed(root: Path) -> None:
    (root / "lib" / "child.akm").unlink()
    reader = Reader({root / "lib" / "child.akm": CHILD})
    assert reader.is_file(root / "lib" / "child.akm")
    assert not reader.is_file(root / "lib" / "other.akm")
    result = Session(root, reader=reader).check(root / "parent.akm")
    assert result.report.diagnostics == []
    assert Session(root).check(root / "parent.akm").report.diagnostics[0].code == "E400"


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300), st.integers(min_value=0, max_value=len(PARENT)))
def test_a_buffer_checks_exactly_as_the_same_text_saved(root: Path, noise: str, at: int) -> None:
    """Whatever the editor holds, checking it from the overlay gives what checking it from disk gives."""
    text = PARENT[:at] + noise + PARENT[at:]
    from_buffer = Session(root, reader=Reader({root / "parent.akm": text})).check(root / "parent.akm")
    (root / "parent.akm").write_bytes(text.encode("utf-8", "surrogatepass"))
    from_disk = Session(root).check(root / "parent.akm")
    assert from_buffer.report.diagnostics == from_disk.report.diagnostics
    assert from_buffer.plan == from_disk.plan
