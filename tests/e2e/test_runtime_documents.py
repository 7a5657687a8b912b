"""What `akm-run` prints is one set of documents whichever store holds the run: every verb's text and
JSON for one workflow that touches most of what a run records (a map with retries, a failure that
continues, a child run, an approval), compared with one snapshot by both store variants. Run ids,
dispatch ids, times and durations are replaced by stable names; nothing else is. The progress `run`
prints on stderr as it follows a drive is compared apart: on PostgreSQL `approve` already submits
the next drive, so how much of it a later `run` still sees is a race."""

from __future__ import annotations

import functools
import re
from typing import Any

from syrupy.assertion import SnapshotAssertion

from helpers import Runtime, source

LEAF = source("""
    workflow "leaf" {
      params {
        n: int
      }
      outputs {
        doubled: int = steps.double.output
      }
      step double {
        shell "python3 -c 'import json,sys; print(json.load(sys.stdin)[\\"inputs\\"][\\"params.n\\"] * 2)'"
        inputs = [params.n]
        output: int
      }
    }
""")
DOCUMENTS = source(r"""
    workflow "documents" {
      params {
        names: list[string] = ["a", "b"]
      }
      outputs {
        greeted = steps.greet.output
        doubled = steps.child.output.doubled
      }
      step greet {
        map params.names {
          shell "echo oops-$AKM_ATTEMPT >&2; test $AKM_ATTEMPT = 2 && printf '\"hi\"' || exit 3"
        }
        retry = { max = 1, on = [exit] }
      }
      step flaky {
        shell "echo broken >&2; exit 2"
        on_error = continue
      }
      step child {
        uses "workflows/leaf" {
          n = 3
        }
      }
      step ok {
        approval "Ship it?"
      }
      step after {
        shell "cat"
        inputs = [steps.ok.output]
      }
    }
""")

# Ids that differ from one run to the next, by the name they are replaced with (numbered in order of
# first appearance, so one id reads the same everywhere), and what the clock decides.
IDS = {
    "RUN": re.compile(r"\b\d{8}T\d{6}-[0-9a-f]{8}\b"),
    "DISPATCH": re.compile(r"\bd-[0-9a-z-]{8,}\b"),
}
CLOCK = (
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\b"), "<time>"),
    (re.compile(r"took \d+(?:\.\d+)?m?s"), "took <duration>"),
    (re.compile(r'"durationMs": \d+'), '"durationMs": <duration>'),
    # whether the activity sampler saw a short unit before it ended (operations.md D6)
    (re.compile(r'\n *"lastActivityAt": "[^"]*",'), ""),
)


class Stable:
    """Rewrites command output so it compares across runs and stores."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        for kind, pattern in IDS.items():
            text = pattern.sub(functools.partial(self._replaced, kind), text)
        for pattern, replacement in CLOCK:
            text = pattern.sub(replacement, text)
        return text

    def _replaced(self, kind: str, match: re.Match[str]) -> str:
        return self._name(kind, match.group(0))

    def _name(self, kind: str, value: str) -> str:
        if value not in self.names:
            self.names[value] = f"<{kind}-{sum(n.startswith(f'<{kind}-') for n in self.names.values()) + 1}>"
        return self.names[value]


def test_every_verb_prints_the_same_documents_on_both_stores(runtime: Runtime, one_snapshot: SnapshotAssertion) -> None:
    runtime.write({"workflows/leaf.akm": LEAF})
    plan = runtime.compile("workflows/documents.akm", DOCUMENTS)
    stable = Stable()
    seen: dict[str, Any] = {}

    def show(*args: str) -> None:
        result = runtime.akm(*args)
        stderr = stable(result.stderr) if args[0] != "run" else "(progress: test_run_shows_each_step_as_it_goes)"
        stdout = stable(result.stdout)
        if args[0] == "approve" and not runtime.sqlite:  # the pool continued the run itself, and says so
            stdout = stdout.replace("; the worker pool continues the run: follow it with `", "; continue with `")
        seen[f"{len(seen) + 1:02} akm-run {stable(' '.join(args))}"] = {
            "exit": result.returncode,
            "stdout": stdout,
            "stderr": stderr,
        }

    show("run", plan.relative_to(runtime.root).as_posix())
    [top] = [r.id for r in runtime.store().runs()]
    [child] = [r.id for r in runtime.store().child_runs(top)]
    for verb in ("status", "logs"):
        for form in ("text", "json"):
            show(verb, top, "--format", form)
    show("status", child, "--format", "json")
    show("list", "--format", "text")
    show("list", "--children", "--format", "json")
    show("approve", top, "after")
    show("approve", top, "ok", "--by", "kim", "--note", "fine")
    show("run", top, "--format", "json")
    show("status", top, "--format", "json")
    show("logs", top, "after", "--format", "json")
    show("abandon", top)
    assert seen == one_snapshot


def test_run_shows_each_step_as_it_goes(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": LEAF})
    plan = runtime.compile("workflows/documents.akm", DOCUMENTS)
    result = runtime.akm("run", plan)
    assert result.returncode == 3, result.stderr
    [top] = runtime.store().runs()
    [child] = runtime.store().child_runs(top.id)
    assert [line.split(" (took ")[0] for line in result.stderr.splitlines()] == [
        "step greet started",
        "step greet completed",
        "step flaky started",
        "step flaky failed",
        "step child started",
        f"workflows/leaf ({child.id}): step double started",
        f"workflows/leaf ({child.id}): step double completed",
        "step child completed",
        "step ok started",
        "step ok blocked",
    ]
