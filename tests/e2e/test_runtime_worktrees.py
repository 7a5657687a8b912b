"""Worktree isolation with real git repositories: each attempt of an `isolation = worktree` step runs
in a detached worktree at the commit frozen when its run was published; clean worktrees are removed,
changed ones kept, journaled and listed; ignored output is disposable; a crash leaves nothing that
`worktrees --prune` cannot clear; a base commit a workdir lacks is preflight's `git` finding, and fails
the unit `worktree_unavailable` when the run goes on unchecked."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from helpers import REPO, Runtime, committed, git, source

# A scripted agent: it records where it ran and what it saw (in the workspace's `log`: $LOG is
# replaced when it is written), leaves ignored output everywhere, and edits a tracked file for `b` only.
AGENT = source("""
    #!/bin/sh
    item=$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("item") or "")' < "$AKM_CONTEXT")
    printf '%s %s %s %s %s\\n' "$AKM_UNIT_ID" "$(pwd -P)" "$AKM_WORKTREE" "$AKM_BASE_COMMIT" "$(git rev-parse HEAD)" >> "$LOG"
    mkdir -p out && echo scratch > out/cache
    if [ "$item" = b ]; then echo "reviewed" >> notes.txt; fi
    echo '"done"'
""")

REVIEW = source("""
    workflow "review" {
      params {
        files: list[string] = ["a", "b", "c"]
      }
      defaults {
        isolation = worktree
      }
      step review {
        map params.files {
          agent "Review the file."
          concurrency = 3
        }
      }
      step report {
        shell "echo '\\"reported\\"'"
        isolation = none
      }
    }
""")


def _repo(runtime: Runtime, *workflows: tuple[str, str]) -> tuple[Path, str]:
    """The workspace as a git repository with the agent and the compiled plans committed (`out/` and
    the state directory ignored); the plan paths and the commit."""
    runtime.write(
        {"scripts/agent.sh": _logging(runtime, AGENT), "notes.txt": "notes\n", ".gitignore": "out/\n.workers/\n"}
    )
    for name, text in workflows:
        runtime.compile(name, text)
    committed(runtime.root)
    return runtime.root, git(runtime.root, "rev-parse", "HEAD").strip()


def _logging(runtime: Runtime, script: str) -> str:
    return script.replace("$LOG", str(runtime.root / "log")).replace("$DRIVER_PID", str(runtime.root / "driver.pid"))


def _env(runtime: Runtime) -> dict[str, str]:
    """The agent configured, and a temporary directory of the test's own: a pool worker keeps its
    worktrees under $TMPDIR."""
    tmp = runtime.root.parent / f"{runtime.root.name}-tmp"
    tmp.mkdir(exist_ok=True)
    return runtime.unit_env(AKM_AGENT_CMD=str(runtime.root / "scripts" / "agent.sh"), TMPDIR=str(tmp))


def _seen(runtime: Runtime) -> list[list[str]]:
    return [line.split() for line in (runtime.root / "log").read_text().splitlines()]


def _worktree_list(root: Path) -> list[str]:
    return [line for line in git(root, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


def test_each_agent_of_a_map_works_in_its_own_worktree_at_the_base_commit(runtime: Runtime) -> None:
    root, base = _repo(runtime, ("workflows/review.akm", REVIEW))
    code, document = runtime.run_json("plans/review.plan.json", env=_env(runtime))
    assert code == 0, document
    seen = _seen(runtime)
    assert len(seen) == 3
    assert len({cwd for _, cwd, _, _, _ in seen}) == 3  # one worktree each
    for _unit, cwd, worktree, commit, head in seen:
        assert Path(cwd) == Path(worktree).resolve() and commit == head == base
        assert Path(worktree).name.endswith("~a1")
    [run] = runtime.store().runs()
    assert (run.base_commit, run.base_repo) == (base, str(root.resolve()))
    # only b's worktree changed a tracked file: it is kept, the others (ignored output only) removed
    [kept] = runtime.sql("SELECT unit_id, worktree FROM attempts WHERE worktree IS NOT NULL")
    path = Path(kept[1])
    assert (path / "notes.txt").read_text() == "notes\nreviewed\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o700 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    kinds = [k for k, *_ in runtime.store().events(run.id)]
    assert kinds.count("worktree.removed") == 2 and kinds.count("worktree.retained") == 1
    line = f"kept worktree …/{path.name} (1 changed file)"
    status = runtime.akm("status", run.id).stdout
    assert f"base: {base[:7]} (…/{root.name})" in status and line in status
    assert line in runtime.akm("logs", run.id, "review").stdout
    listed = json.loads(runtime.akm("worktrees", "--format", "json").stdout)["worktrees"]
    assert [(e["path"], e["files"], e["changedFiles"]) for e in listed] == [(str(path), ["notes.txt"], 1)]
    assert git(root, "status", "--porcelain", "--untracked-files=no") == ""  # the user's checkout is untouched
    assert runtime.akm("worktrees", "--prune", "--dirty").returncode == 0
    assert not path.exists() and len(_worktree_list(root)) == 1


@pytest.mark.sqlite_only  # the worktrees of a pool's attempts live in its workers' directories
def test_worktrees_are_private_under_the_state_dir_and_hidden_from_the_checkout(runtime: Runtime) -> None:
    root, _ = _repo(runtime, ("workflows/review.akm", REVIEW))
    assert runtime.run_json("plans/review.plan.json", env=_env(runtime))[0] == 0
    top = runtime.state / "worktrees"
    assert stat.S_IMODE(top.stat().st_mode) == 0o700
    assert all(Path(wt).is_relative_to(top.resolve()) for _, _, wt, _, _ in _seen(runtime))
    untracked = git(root, "status", "--porcelain", "--untracked-files=all")
    assert "worktrees" not in untracked and "notes.txt" not in untracked


@pytest.mark.sqlite_only
def test_clean_worktrees_are_pruned_and_dirty_ones_only_with_dirty(runtime: Runtime) -> None:
    root, _ = _repo(runtime, ("workflows/review.akm", REVIEW))
    assert runtime.run_json("plans/review.plan.json", env=_env(runtime))[0] == 0
    [(path,)] = runtime.sql("SELECT worktree FROM attempts WHERE worktree IS NOT NULL")
    assert runtime.akm("worktrees", "--dirty").returncode == 2
    pruned = runtime.akm("worktrees", "--prune")
    assert pruned.returncode == 0 and "(1 changed file)" in pruned.stdout and Path(path).is_dir()
    git(Path(path), "checkout", "--", "notes.txt")  # reviewed and discarded: clean now
    pruned = runtime.akm("worktrees", "--prune", "--format", "json")
    assert [e["path"] for e in json.loads(pruned.stdout)["removed"]] == [path]
    assert not Path(path).exists() and len(_worktree_list(root)) == 1
    assert runtime.akm("worktrees").stdout == "no kept worktrees\n"
    assert runtime.sql("SELECT COUNT(*) FROM attempts WHERE worktree IS NOT NULL") == [(0,)]


def test_a_worktree_git_refuses_to_remove_is_named_and_prune_exits_1(runtime: Runtime) -> None:
    _repo(runtime, ("workflows/review.akm", REVIEW))
    assert runtime.run_json("plans/review.plan.json", env=_env(runtime))[0] == 0
    [(path,)] = runtime.sql("SELECT worktree FROM attempts WHERE worktree IS NOT NULL")
    git(Path(path), "worktree", "lock", path)  # git removes no locked worktree
    pruned = runtime.akm("worktrees", "--prune", "--dirty", "--format", "json")
    assert pruned.returncode == 1, pruned.stderr
    [left] = json.loads(pruned.stdout)["worktrees"]
    assert left["path"] == path and "failed" in left["error"] and Path(path).is_dir()


LINKED = source("""
    workflow "linked" {
      step vandal {
        script "scripts/vandal.sh"
        isolation = worktree
      }
    }
""")

VANDAL = source("""
    #!/bin/sh
    # Its worktree replaced by a link to the user's checkout, which has changes of its own.
    w=$(pwd) && cd / && rm -rf "$w" && ln -s "$CHECKOUT" "$w" && echo '"linked"'
""")


def test_a_link_a_unit_leaves_in_place_of_its_worktree_is_removed_never_followed(runtime: Runtime) -> None:
    runtime.write({"scripts/vandal.sh": VANDAL.replace("$CHECKOUT", str(runtime.root))})
    root, _ = _repo(runtime, ("workflows/linked.akm", LINKED))
    (root / "notes.txt").write_text("the user's own edit\n")
    code, document = runtime.run_json("plans/linked.plan.json", env=_env(runtime))
    assert code == 0, document
    assert runtime.sql("SELECT COUNT(*) FROM attempts WHERE worktree IS NOT NULL") == [(0,)]  # nothing kept
    assert runtime.akm("worktrees").stdout == "no kept worktrees\n"
    assert (root / "notes.txt").read_text() == "the user's own edit\n"
    listed = git(root, "worktree", "list", "--porcelain").split("\n\n")
    assert all("prunable" in entry for entry in listed[1:] if entry.strip())  # gone: git forgets it at a prune


PINNED = source("""
    workflow "pinned" {
      step first {
        agent "Look."
        isolation = worktree
      }
      step move {
        shell "echo moved >> notes.txt && git commit -qam moved && echo '\\"moved\\"'"
      }
      step after_move {
        agent "Look again."
        isolation = worktree
      }
      step wait {
        approval "Go on?"
      }
      step resumed {
        agent "Look once more."
        isolation = worktree
      }
    }
""")


@pytest.mark.sqlite_only
def test_head_moving_during_a_run_or_before_a_resume_changes_nothing(runtime: Runtime) -> None:
    root, base = _repo(runtime, ("workflows/pinned.akm", PINNED))
    env = _env(runtime)
    code, document = runtime.run_json("plans/pinned.plan.json", env=env)
    assert code == 3, document
    assert git(root, "rev-parse", "HEAD").strip() != base  # the `move` step committed
    assert runtime.akm("approve", document["runId"], "wait", env=env).returncode == 0
    resumed = runtime.akm("run", document["runId"], env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert [commit for *_, commit, _ in _seen(runtime)] == [base, base, base]
    assert [head for *_, head in _seen(runtime)] == [base, base, base]
    assert resumed.stderr.count(f"keeps its base commit {base[:7]}") == 1


CRASHING = source("""
    workflow "crashing" {
      step work {
        agent "Work."
        isolation = worktree
      }
    }
""")

# The first attempt changes a file and kills the driver's process group (and itself) mid-attempt.
CRASH_AGENT = source("""
    #!/bin/sh
    echo "$AKM_WORKTREE" >> "$LOG-worktrees"
    if [ ! -e "$LOG-crashed" ]; then
      touch "$LOG-crashed"
      echo half-done >> notes.txt
      kill -9 -"$(cat "$DRIVER_PID")"
      kill -9 $$
    fi
    echo '"done"'
""")


@pytest.mark.sqlite_only
def test_a_killed_attempt_s_worktree_is_settled_and_its_reclaim_gets_a_fresh_one(runtime: Runtime) -> None:
    root, _ = _repo(runtime, ("workflows/crashing.akm", CRASHING))
    runtime.write({"scripts/crash-agent.sh": _logging(runtime, CRASH_AGENT)})
    env = runtime.env(AKM_AGENT_CMD=str(root / "scripts" / "crash-agent.sh"))
    runtime.killed(runtime.driver("plans/crashing.plan.json", env=env))
    [run] = runtime.store().runs()
    code, document = runtime.run_json(run.id, env=env)
    assert code == 0, document
    first, second = (root / "log-worktrees").read_text().split()
    assert first.endswith("~a1") and second.endswith("~a2")
    # the interrupted attempt changed a file: kept and journaled; the reclaimed one was clean
    assert runtime.sql("SELECT attempt, status, worktree FROM attempts") == [
        (1, "interrupted", first),
        (2, "completed", None),
    ]
    assert runtime.akm("worktrees", run.id, "--prune", "--dirty").returncode == 0
    assert len(_worktree_list(root)) == 1 and not Path(first).exists()


def test_a_run_whose_steps_use_worktrees_is_refused_outside_a_git_work_tree(runtime: Runtime) -> None:
    runtime.write({"scripts/agent.sh": AGENT})
    plan = runtime.compile("workflows/review.akm", REVIEW)
    refused = runtime.akm("run", plan, env=_env(runtime))  # preflight's `git` check
    assert refused.returncode == 5, refused.stderr
    assert "[git] review: steps run in git worktrees, but --workdir . cannot give them a base commit" in refused.stderr
    assert "is not inside a git work tree" in refused.stderr and "nothing was published" in refused.stderr
    unchecked = runtime.akm("run", plan, "--no-preflight", env=_env(runtime))  # publishing itself refuses too
    assert unchecked.returncode == 2
    assert "runs steps in git worktrees" in unchecked.stderr and "is not inside a git work tree" in unchecked.stderr
    assert "nothing was published" in unchecked.stderr and runtime.untouched()
    assert not (runtime.root / "log").exists()


def test_deleting_or_pruning_a_run_removes_its_kept_worktrees_from_disk_and_from_git(runtime: Runtime) -> None:
    root, base = _repo(runtime, ("workflows/review.akm", REVIEW))
    first, second = (runtime.run_json("plans/review.plan.json", env=_env(runtime))[1]["runId"] for _ in range(2))
    kept = dict(runtime.sql("SELECT run_id, worktree FROM attempts WHERE worktree IS NOT NULL"))
    assert set(kept) == {first, second} and len(_worktree_list(root)) == 3
    deleted = runtime.akm("delete", first)
    assert deleted.returncode == 0, deleted.stderr
    assert not Path(kept[first]).exists() and Path(kept[second]).is_dir() and len(_worktree_list(root)) == 2
    if runtime.sqlite:  # a crashed attempt's worktree, never journaled: its directory goes, and git forgets it
        leftover = runtime.state / "worktrees" / second / "review:x~a1"
        git(root, "worktree", "add", "--detach", "-q", str(leftover), base)
    runtime.sql("UPDATE runs SET updated_at = 0 WHERE id = ?", second)
    pruned = runtime.akm("prune", "--older-than", "1d")
    assert pruned.returncode == 0 and "1 run(s) deleted" in pruned.stdout, pruned.stderr
    assert not Path(kept[second]).exists() and _worktree_list(root) == [f"worktree {root.resolve()}"]
    assert json.loads(runtime.akm("worktrees", "--format", "json").stdout) == {"worktrees": []}
    assert git(root, "status", "--porcelain", "--untracked-files=no") == ""


CHECKS = source("""
    workflow "checks" {
      defaults {
        isolation = worktree
      }
      parallel checks {
        step lint {
          agent "Lint."
        }
        step audit {
          agent "Audit."
        }
      }
    }
""")


@pytest.mark.sqlite_only
def test_the_members_of_a_parallel_block_run_at_once_each_in_its_own_worktree(runtime: Runtime) -> None:
    root, base = _repo(runtime, ("workflows/checks.akm", CHECKS))
    code, document = runtime.run_json("plans/checks.plan.json", env=_env(runtime))
    assert code == 0, document
    seen = {unit: (cwd, commit) for unit, cwd, _, commit, _ in _seen(runtime)}
    assert set(seen) == {"lint:solo", "audit:solo"} and len({cwd for cwd, _ in seen.values()}) == 2
    assert all(Path(cwd).name == f"{unit}~a1" and commit == base for unit, (cwd, commit) in seen.items())
    assert runtime.sql("SELECT worktree FROM attempts WHERE worktree IS NOT NULL") == []  # neither changed a file
    assert len(_worktree_list(root)) == 1


BLOCKED_FIRST = source("""
    workflow "later" {
      step wait {
        approval "Go on?"
      }
      step work {
        agent "Work."
        isolation = worktree
      }
    }
""")


@pytest.mark.sqlite_only
def test_a_workdir_whose_repository_lacks_the_base_commit_fails_the_unit(runtime: Runtime, tmp_path: Path) -> None:
    root, base = _repo(runtime, ("workflows/later.akm", BLOCKED_FIRST))
    behind = tmp_path.parent / f"{tmp_path.name}-behind"
    git(tmp_path.parent, "clone", "-q", str(root), str(behind))
    git(root, "commit", "-q", "--allow-empty", "-m", "ahead")
    env = _env(runtime)
    code, document = runtime.run_json("plans/later.plan.json", env=env)
    assert code == 3 and runtime.store().run(document["runId"]).base_commit != base  # type: ignore[union-attr]
    assert runtime.akm("approve", document["runId"], "wait").returncode == 0
    checked = runtime.akm("run", document["runId"], "--workdir", behind, env=env)  # preflight's `git` check
    assert checked.returncode == 5, checked.stderr
    assert f"the run's base commit {runtime.store().run(document['runId']).base_commit} is not in" in checked.stderr  # type: ignore[union-attr]
    assert "hint: fetch " in checked.stderr and runtime.sql("SELECT reason FROM attempts") == []
    code, document = runtime.run_json(document["runId"], "--workdir", behind, "--no-preflight", env=env)
    assert code == 1, document
    [(reason, message)] = runtime.sql("SELECT failure_reason, failure_message FROM units")
    assert reason == "worktree_unavailable" and "is not in the repository" in message
    assert runtime.sql("SELECT reason FROM attempts") == [("worktree_unavailable",)]
    assert not (runtime.root / "log").exists()  # the agent never ran
    shutil.rmtree(behind)


def test_a_pool_worker_whose_clone_lacks_the_base_commit_fails_the_unit(pooled: Runtime, tmp_path: Path) -> None:
    root, base = _repo(pooled, ("workflows/later.akm", BLOCKED_FIRST))
    ahead = tmp_path.parent / f"{tmp_path.name}-ahead"  # where the run is published: a clone one commit on
    git(tmp_path.parent, "clone", "-q", str(root), str(ahead))
    git(ahead, "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-q", "--allow-empty", "-m", "on")
    env = _env(pooled)  # the worker serves from the workspace: its clone is behind
    code, document = pooled.run_json("plans/later.plan.json", "--workdir", ahead, env=env)
    assert code == 3, document
    run_id = document["runId"]
    assert pooled.store().run(run_id).base_commit not in (None, base)  # type: ignore[union-attr]
    shutil.rmtree(ahead)  # not on the worker's host: the worker runs units in its own workdir
    with pooled.paused():
        assert pooled.akm("approve", run_id, "wait").returncode == 0
    checked = pooled.akm("run", run_id, env=env)  # the worker's preflight: its clone lacks the base commit
    assert checked.returncode == 5 and "[git] work: the run's base commit" in checked.stderr, checked.stderr
    failed = pooled.sql("SELECT data_json FROM events WHERE kind = 'preflight.failed'")
    assert failed and all([f["check"] for f in json.loads(d)["findings"]] == ["git"] for (d,) in failed)
    code, document = pooled.run_json(run_id, "--no-preflight", env=env)  # the worker skips it: the unit fails
    assert code == 1, document
    [(reason, message)] = pooled.sql("SELECT failure_reason, failure_message FROM units")
    assert reason == "worktree_unavailable" and "is not in the repository" in message
    assert not (pooled.root / "log").exists()


PARENT = source("""
    workflow "parent" {
      step call {
        uses "workflows/child"
      }
    }
""")
CHILD = source("""
    workflow "child" {
      step work {
        agent "Work."
        isolation = worktree
      }
    }
""")


@pytest.mark.sqlite_only
def test_a_child_run_inherits_its_root_s_base_commit(runtime: Runtime) -> None:
    root, base = _repo(runtime, ("workflows/child.akm", CHILD), ("workflows/parent.akm", PARENT))
    code, document = runtime.run_json("plans/parent.plan.json", env=_env(runtime))
    assert code == 0, document
    runs = {r.ref: r for r in runtime.store().runs(children=True)}
    assert {ref: (r.base_commit, r.base_repo) for ref, r in runs.items()} == {
        "workflows/parent": (base, str(root.resolve())),
        "workflows/child": (base, str(root.resolve())),
    }
    [(_, cwd, worktree, commit, _)] = _seen(runtime)
    assert commit == base and Path(cwd) == Path(worktree).resolve()
    assert Path(worktree).parent.name == runs["workflows/child"].id


# Fixes the file it is given: appends a line to it.
FIXER = source("""
    #!/bin/sh
    file=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["item"])' < "$AKM_CONTEXT")
    echo "fixed" >> "$file"
    echo '"fixed"'
""")


@pytest.mark.sqlite_only
def test_the_example_keeps_one_worktree_per_fixed_file(runtime: Runtime) -> None:
    example = (REPO / "examples" / "workflows" / "fixes.akm").read_text()
    runtime.write({"scripts/fixer.sh": FIXER, "README.md": "# typos\n", "NOTES.md": "notes\n"})
    runtime.compile("workflows/fixes.akm", example)
    committed(runtime.root)
    env = runtime.env(AKM_AGENT_CMD=str(runtime.root / "scripts" / "fixer.sh"))
    code, document = runtime.run_json("plans/fixes.plan.json", "--param", 'files=["README.md", "NOTES.md"]', env=env)
    assert code == 0, document
    listed = json.loads(runtime.akm("worktrees", document["runId"], "--format", "json").stdout)["worktrees"]
    assert sorted(e["files"][0] for e in listed) == ["NOTES.md", "README.md"]
    assert (runtime.root / "README.md").read_text() == "# typos\n"  # the checkout itself is untouched
