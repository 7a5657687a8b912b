"""akm_run.units: a unit's process runs nothing before `on_spawn` has registered it (the worker's
guard, the journaled pid), and nothing at all when registering fails. Real processes."""

from __future__ import annotations

import json
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run import units
from akm_run.core import End
from profiles import examples


def _unit(tmp_path: Path, target: dict[str, object]) -> units.Unit:
    context = {"dispatchId": "d1", "attempt": 1, "runId": "r1", "stepId": "a", "unitId": "a"}
    return units.Unit(target=target, context=context, workdir=tmp_path)


def _execute(tmp_path: Path, target: dict[str, object], on_spawn: Callable[[int], None] = lambda pid: None) -> End:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    return units.execute(_unit(tmp_path, target), threading.Event(), on_spawn, {}, scratch)


SCRIPT = {"kind": "script", "path": "s.sh", "text": "#!/bin/sh\necho started > started\necho '{\"n\": 1}'\n"}


@pytest.mark.parametrize("target", [{"kind": "shell", "command": "echo started > started; echo 1"}, SCRIPT])
def test_a_unit_starts_only_once_its_process_group_is_registered(tmp_path: Path, target: dict[str, object]) -> None:
    seen: list[bool] = []

    def on_spawn(pid: int) -> None:
        time.sleep(0.3)  # a slow registration: a unit that ran ahead would have written its file by now
        seen.append((tmp_path / "started").exists())

    ended = _execute(tmp_path, target, on_spawn)
    assert ended.status == "completed", ended
    assert seen == [False] and (tmp_path / "started").exists()


@pytest.mark.parametrize("target", [{"kind": "shell", "command": "echo started > started"}, SCRIPT])
def test_a_unit_whose_registration_fails_runs_nothing(tmp_path: Path, target: dict[str, object]) -> None:
    def on_spawn(pid: int) -> None:
        raise ConnectionError("the journal is unreachable")

    with pytest.raises(ConnectionError):
        _execute(tmp_path, target, on_spawn)
    time.sleep(0.2)
    assert not (tmp_path / "started").exists()


def test_a_shell_unit_reads_its_context_on_stdin_and_sees_nothing_of_the_gate(tmp_path: Path) -> None:
    _execute(tmp_path, {"kind": "shell", "command": 'printf "%s|%s|%s|" "$0" "$akm_gate" "$?" > seen; cat >> seen'})
    zero, gate, status, context = (tmp_path / "seen").read_text().split("|", 3)
    assert (zero, gate, status) == ("/bin/sh", "", "0")
    assert json.loads(context)["unitId"] == "a"


@pytest.mark.parametrize("first", ["# a comment first", "", "  ", "! false", "{ true; }", "cat <<EOF\nx\nEOF"])
@settings(max_examples=examples(50))
@given(words=st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=40))
def test_any_command_line_runs_behind_the_gate_as_it_would_alone(
    tmp_path_factory: pytest.TempPathFactory, first: str, words: str
) -> None:
    # Whatever the command line starts with, the gate's words before it change nothing of how it parses.
    tmp = tmp_path_factory.mktemp("gate")
    ended = _execute(tmp, {"kind": "shell", "command": f"{first}\nprintf %s {shlex.quote(words)} > out; echo 1"})
    assert ended.status == "completed", ended
    assert (tmp / "out").read_bytes() == words.encode()
