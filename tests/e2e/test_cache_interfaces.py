"""A parent re-checked for an edited child reads its other children's interfaces from the cache:
the same diagnostics and plan as compiling them, never a stale or tampered interface, and only the
files asked about (with their children) and the parents they made re-check are reported."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from akm_run.digest import canonical_bytes
from akmc import checkcache, syntax
from akmc.cache import INTERFACE_SUFFIX, Cache, sealed, secret
from akmc.commands import check
from akmc.compiler import Session
from helpers import edit, run_cli, source

CHILDREN = 5


def _child(index: int) -> str:
    extra = '\n  step tool {\n    shell "scripts/run.sh"\n  }\n' if index == CHILDREN - 1 else ""
    return (
        source(f"""
        workflow "child {index}" {{
          params {{
            version: string
          }}

          outputs {{
            files = steps.list.output.files
          }}

          step list {{
            shell "echo"
            inputs = [params.version]
            output: {{ files: list[string] }}
          }}
        """)
        + extra
        + "}\n"
    )


def _parent() -> str:
    steps = "".join(
        f'  step c{i} {{\n    uses "workflows/c{i}" {{\n      version = params.version\n    }}\n  }}\n\n'
        for i in range(CHILDREN)
    )
    reads = ", ".join(f"steps.c{i}.output.files" for i in range(CHILDREN))
    report = f'  step report {{\n    shell "echo"\n    inputs = [{reads}]\n  }}\n'
    return 'workflow "parent" {\n  params {\n    version: string\n  }\n\n' + steps + report + "}\n"


TOP = source("""
    workflow "top" {
      step wide {
        uses "workflows/parent" {
          version = "1"
        }
      }
    }
""")


@pytest.fixture
def wide(tmp_path: Path) -> Path:
    """`top` composes `parent`, which composes c0…c4; c4 has a warning of its own (W708)."""
    root = tmp_path / "ws"
    (root / "workflows").mkdir(parents=True)
    (root / "scripts").mkdir()
    (root / "akm.toml").write_text("")
    (root / "scripts" / "run.sh").write_text("#!/bin/sh\necho\n")
    for i in range(CHILDREN):
        (root / "workflows" / f"c{i}.akm").write_text(_child(i))
    (root / "workflows" / "parent.akm").write_text(_parent())
    (root / "workflows" / "top.akm").write_text(TOP)
    warm = _check(root, ".")
    assert [(d["file"], d["code"]) for d in json.loads(warm.stdout)] == [("workflows/c4.akm", "W708")]
    return root


def _check(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = run_cli("check", "--format", "json", *args, cwd=root)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done


def _found(root: Path, *args: str) -> list[tuple[str, str]]:
    """(file, code) of each diagnostic of a check, with the cache, after checking that the same
    check without the cache reports exactly the same."""
    cached = _check(root, *args).stdout
    assert cached == _check(root, "--no-cache", *args).stdout
    return [(d["file"], d["code"]) for d in json.loads(cached)]


def _rename_output(root: Path, index: int) -> None:
    edit(root / "workflows" / f"c{index}.akm", "    files = steps", "    paths = steps")


def test_an_edited_child_reports_itself_and_the_parents_it_rechecks_not_their_other_children(wide: Path) -> None:
    edit(wide / "workflows" / "c2.akm", '"child 2"', '"child 2, edited"')
    assert _found(wide, "workflows/c2.akm") == []  # c4's W708 stands at c4, which was not asked about
    done = run_cli("check", "workflows/c2.akm", cwd=wide)
    assert done.returncode == 0 and "(3 files checked)" in done.stdout  # c2, parent, top
    # a file asked about is reported with every child it composes, from the cache or not
    assert _found(wide, "workflows/parent.akm") == [("workflows/c4.akm", "W708")]
    assert _found(wide, "workflows/c4.akm") == [("workflows/c4.akm", "W708")]


def test_the_parent_is_checked_without_parsing_its_unchanged_children(
    wide: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parsed: list[str] = []
    parse = syntax.parse

    def counting(text: str, *args: Any, **kwargs: Any) -> Any:
        parsed.append(text.splitlines()[0])
        return parse(text, *args, **kwargs)

    monkeypatch.setattr(syntax, "parse", counting)
    monkeypatch.chdir(wide)
    edit(wide / "workflows" / "c2.akm", '"child 2"', '"child 2, edited"')
    assert check.run([Path("workflows/c2.akm")], output_format="json") == 0
    assert json.loads(capsys.readouterr().out) == []
    assert sorted(parsed) == ['workflow "child 2, edited" {', 'workflow "parent" {', 'workflow "top" {']


def test_a_child_interface_change_rechecks_the_parent(wide: Path) -> None:
    _rename_output(wide, 2)
    assert _found(wide, "workflows/c2.akm") == [("workflows/parent.akm", "E407"), ("workflows/top.akm", "E408")]
    edit(wide / "workflows" / "c2.akm", "    paths = steps", "    files = steps")
    assert _found(wide, "workflows/c2.akm") == []


def test_a_sibling_edited_since_its_entry_was_written_is_read_again(wide: Path) -> None:
    _rename_output(wide, 3)  # c3 is not asked about: its entry no longer matches its file
    edit(wide / "workflows" / "c2.akm", '"child 2"', '"child 2, edited"')
    assert _found(wide, "workflows/c2.akm") == [("workflows/parent.akm", "E407"), ("workflows/top.akm", "E408")]


def _record(root: Path, name: str) -> Path:
    """Where the cache keeps the interface of `workflows/<name>.akm`."""
    return Cache(root, True)._entry_path(f"workflows/{name}.akm").with_suffix(INTERFACE_SUFFIX)


def _forge(root: Path, *, sign: bool, plan: bool = False) -> None:
    """c3's interface with a required param the parent does not bind (believed, that is E406 at
    the parent); `sign`: sealed with this user's key, as only the cache itself can; `plan`: and a
    plan that is not the one its hash names. (A record is `[sealed record,\\nplan bytes]`.)"""
    path = _record(root, "c3")
    header, _, plan_bytes = path.read_bytes()[1:-1].partition(b",\n")
    record: dict[str, Any] = json.loads(header)
    record["interface"]["params"].append(["extra", ["prim", "string", []], True])
    if plan:
        plan_bytes = plan_bytes.replace(b'"child 3"', b'"child 3, forged"')
    if sign:
        key = secret()
        assert key is not None
        header = sealed(key, {k: v for k, v in record.items() if k != "mac"})
    else:
        header = json.dumps(record).encode()
    path.write_bytes(b"[" + header + b",\n" + plan_bytes + b"]")


HOW = ["edited", "truncated", "sealed with a plan its hash does not name", "another child's", "removed"]


@pytest.mark.parametrize("how", HOW)
def test_a_tampered_or_truncated_sibling_interface_is_ignored(wide: Path, how: str) -> None:
    path = _record(wide, "c3")
    genuine = path.read_bytes()
    if how == "truncated":
        path.write_bytes(genuine[: len(genuine) // 2])
    elif how == "another child's":  # sealed by this user's cache, for c4: it never speaks for c3
        path.write_bytes(_record(wide, "c4").read_bytes())
    elif how == "removed":
        path.unlink()
    else:
        _forge(wide, sign=how != "edited", plan=True)
    edit(wide / "workflows" / "c2.akm", '"child 2"', '"child 2, edited"')
    assert _found(wide, "workflows/c2.akm") == []  # c3 compiled again: no param `extra` to bind
    assert path.read_bytes() == genuine  # and its record written again


def test_the_forgery_is_seen_when_sealed_whole(wide: Path) -> None:
    """The control of the test above: an interface this user's key seals, with the plan its hash
    names, is believed, so the param it adds is what the parent is checked against."""
    _forge(wide, sign=True)
    edit(wide / "workflows" / "c2.akm", '"child 2"', '"child 2, edited"')
    found = [(d["file"], d["code"]) for d in json.loads(_check(wide, "workflows/c2.akm").stdout)]
    assert found == [("workflows/parent.akm", "E406"), ("workflows/top.akm", "E408")]


def test_a_parent_compiled_against_interfaces_has_the_same_diagnostics_and_plan(wide: Path) -> None:
    _rename_output(wide, 1)  # the parent has an error (E407), and no plan, until the read is fixed
    for fix in (False, True):
        if fix:
            edit(wide / "workflows" / "parent.akm", "steps.c1.output.files", "steps.c1.output.paths")
        assert _check(wide, ".").returncode == (0 if fix else 1)  # every entry is current
        parent = wide / "workflows" / "parent.akm"
        fresh = Session(wide)
        compiled = fresh.check(parent)
        read = Session(wide, interfaces=checkcache.interfaces(Cache(wide, True)))
        answered = read.check(parent)
        assert [r.ref for r in read.results] == ["workflows/parent"]  # no child compiled
        assert answered.report.diagnostics == compiled.report.diagnostics
        assert (answered.plan is None) == (compiled.plan is None) == (not fix)
        if answered.plan is not None and compiled.plan is not None:
            assert canonical_bytes(answered.plan) == canonical_bytes(compiled.plan)
            assert answered.deps == compiled.deps
