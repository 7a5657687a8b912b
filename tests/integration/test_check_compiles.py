"""Whatever `akmc check` accepts, `akmc compile` compiles into a plan that `akmc verify` accepts.

Over every source the project ships (golden cases, examples, the `akm` snippets in docs), over
generated workflows and over mutations of the shipped sources. No input may raise: an internal
error is a bug whatever the source says."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from akm_run.plan import render_file, verify_file
from akmc.compiler import Session
from akmc.diagnostics import ERROR
from akmc.workspace import SourceError
from helpers import REPO, source
from profiles import examples

SNIPPET = re.compile(r"```akm(?: [^\n]*)?\n(.*?)```", re.S)
CHILD = source("""
    workflow "child" {
      params {
        environment: string
        count: int = 1
      }
      outputs {
        done: string = steps.a.output
      }
      step a {
        shell "deploy"
        inputs = [params.environment, params.count]
        output: string
      }
    }
""")


def _shipped() -> Iterator[Path]:
    for folder in ("golden", "examples"):
        yield from sorted((REPO / folder).rglob("*.akm"))


def _snippets() -> list[str]:
    found = []
    for page in sorted((REPO / "docs").rglob("*.md")):
        found += SNIPPET.findall(page.read_text())
    return found


SHIPPED_TEXTS = [p.read_text(encoding="utf-8", errors="replace") for p in _shipped()] + _snippets()


def _holds(root: Path, name: str) -> bool:
    """The property for one file of a workspace; True when the file checked clean."""
    session = Session(root)
    try:
        result = session.check(root / name)
    except SourceError:  # the one acceptable exception: a path that cannot be read (any other fails the test)
        return False
    errors = [d for d in result.report.diagnostics if d.severity == ERROR]
    if errors:
        return False
    assert result.plan is not None, "checked clean but produced no plan"
    verify_file(render_file(result.plan).encode())
    return True


@pytest.mark.parametrize("path", list(_shipped()), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_shipped_source(path: Path, tmp_path: Path) -> None:
    """In its own workspace (children and scripts resolve), and again alone in an empty one."""
    root = next((p for p in path.parents if (p / "akm.toml").exists()), path.parent)
    _holds(root, path.relative_to(root).as_posix())
    (tmp_path / "akm.toml").write_text("")
    shutil.copy(path, tmp_path / "wf.akm")
    _holds(tmp_path, "wf.akm")


@pytest.mark.parametrize("index", range(len(_snippets())))
def test_every_docs_snippet(index: int, tmp_path: Path) -> None:
    shutil.copytree(REPO / "golden" / "corpus", tmp_path / "ws")
    (tmp_path / "ws" / "wf.akm").write_text(_snippets()[index])
    _holds(tmp_path / "ws", "wf.akm")


# -- generated workflows -----------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "xs", "mode", "n", "item", "zz"])
TYPES = st.sampled_from(
    ["string", "int", "list[string]", "list[{ name: string }]", '"x" | "y"', "string | null", "any", "bool"]
)
SEGMENTS = st.lists(st.sampled_from([".name", ".f", "[0]", ".output"]), max_size=2).map("".join)
REFERENCES = st.one_of(
    st.builds(lambda n: f"params.{n}", NAMES),
    st.builds(lambda n, s: f"steps.{n}.output{s}", st.sampled_from(["s0", "s1", "s2", "s3", "nope"]), SEGMENTS),
    st.builds(lambda s: f"item{s}", SEGMENTS),
)
SETTINGS = st.lists(
    st.sampled_from(
        [
            "timeout = 5s",
            "retry = 1",
            "retry = 0",
            "on_error = continue",
            'env { A = "b" }',
            "concurrency = 2",
            'gate { check shell "t" }',
            'env { S = secret("") }',
        ]
    ),
    max_size=2,
).map(" ".join)


# Workspace files with names a plan can carry and names it cannot (a space, non-ASCII letters, both
# spellings of an accent): check must report the latter, never pass them on to fail in compile.
SCRIPTS = ["scripts/ok.sh", "scripts dir/run me.sh", "scripts/\u00fcn\u00efcode.sh", "scripts/tab\tname.sh"]
PROMPTS = ["prompts/p.md", "prompts/a b.md", "pr\u00f6mpt.md", "pro\u0308mpt.md", "prompts/\u65e5\u672c.md"]
SOURCES = ["wf.akm", "my flow.akm", "fl\u00f6w.akm", "nested dir/wf.akm"]


@st.composite
def _target(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["shell", "approval", "uses", "uses-bound", "script", "prompt"]))
    if kind == "shell":
        return 'shell "x"'
    if kind == "script":
        return f'script "{draw(st.sampled_from(SCRIPTS))}"'
    if kind == "prompt":
        return f'agent file("{draw(st.sampled_from(PROMPTS))}")'
    if kind == "approval":
        return 'approval "ok?"'
    if kind == "uses":
        return 'uses "child" { environment = "prod" }'
    return f'uses "child" {{ environment = {draw(REFERENCES)} }}'


@st.composite
def _step(draw: st.DrawFn, index: int) -> str:
    shape = draw(st.sampled_from(["target", "map", "route"]))
    body = ""
    if shape == "target":
        body = draw(_target())
    elif shape == "map":
        body = f"map {draw(REFERENCES)} {{ {draw(_target())} {draw(SETTINGS)} }}"
    else:
        later = draw(st.sampled_from([f"s{index + 1}", f"s{index + 2}", "s0"]))
        body = f'route {draw(REFERENCES)} {{ "x" -> {later}  _ -> s{index + 1} }}'
    extras = draw(SETTINGS)
    inputs = draw(st.lists(REFERENCES, max_size=2))
    if inputs:
        extras += f" inputs = [{', '.join(inputs)}]"
    if draw(st.booleans()):
        extras += f" output: {draw(TYPES)}"
    return f"  step s{index} {{ {body} {extras} }}\n"


@st.composite
def _workflow(draw: st.DrawFn) -> str:
    params = draw(st.lists(st.tuples(NAMES, TYPES), max_size=3, unique_by=lambda p: p[0]))
    steps = [draw(_step(i)) for i in range(draw(st.integers(1, 4)))]
    steps.append('  step s9 { shell "end" }\n')
    outputs = draw(
        st.lists(
            st.tuples(st.sampled_from(["o", "p"]), st.one_of(st.none(), TYPES), REFERENCES),
            max_size=2,
            unique_by=lambda o: o[0],
        )
    )
    src = 'workflow "generated" {\n'
    if draw(st.booleans()):
        src += '  defaults { timeout = 1m retry = 2 env { L = "C" } }\n'
    if params:
        src += "  params { " + "  ".join(f"{n}: {t}" for n, t in params) + " }\n"
    if outputs:
        src += "  outputs { " + "  ".join(f"{n}{'' if t is None else ': ' + t} = {r}" for n, t, r in outputs) + " }\n"
    return src + "".join(steps) + "}\n"


@pytest.fixture(scope="module")
def generated_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("generated")
    (root / "akm.toml").write_text("")
    (root / "child.akm").write_text(CHILD)
    for name in SCRIPTS + PROMPTS:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("#!/bin/sh\necho hi\n" if name in SCRIPTS else "Say hi\n")
    return root


@pytest.mark.slow
@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=_workflow(), name=st.sampled_from(SOURCES))
def test_generated_workflows(generated_root: Path, source: str, name: str) -> None:
    (generated_root / name).parent.mkdir(exist_ok=True)
    (generated_root / name).write_text(source)
    event("checked clean" if _holds(generated_root, name) else "diagnosed")


@pytest.mark.parametrize("path", SCRIPTS + PROMPTS)
def test_a_file_name_a_plan_cannot_carry_is_diagnosed_or_compiles(generated_root: Path, path: str) -> None:
    """Every file name of the generator, alone: checked clean only when the plan can name it."""
    target = f'script "{path}"' if path in SCRIPTS else f'agent file("{path}")'
    (generated_root / "wf.akm").write_text(f'workflow "w" {{\n  step a {{ {target} }}\n}}\n')
    assert _holds(generated_root, "wf.akm") == (path in ("scripts/ok.sh", "prompts/p.md"))


@pytest.mark.parametrize("name", SOURCES)
def test_a_workflow_file_name_a_plan_cannot_carry_is_diagnosed(generated_root: Path, name: str) -> None:
    (generated_root / name).parent.mkdir(exist_ok=True)
    (generated_root / name).write_text('workflow "w" {\n  step a { shell "x" }\n}\n')
    assert _holds(generated_root, name) == (name == "wf.akm")


def test_generated_workflows_are_sometimes_clean(generated_root: Path) -> None:
    """The generator reaches the compile half of the property, not only the diagnostics."""
    clean = 'workflow "g" {\n  params { xs: list[{ name: string }] }\n'
    clean += '  step s0 { map params.xs { uses "child" { environment = item.name } } }\n}\n'
    (generated_root / "wf.akm").write_text(clean)
    assert _holds(generated_root, "wf.akm")


# -- mutated shipped sources ---------------------------------------------------------------------------


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SHIPPED_TEXTS))
    for _ in range(draw(st.integers(1, 2))):
        if not text:
            break
        at = draw(st.integers(0, len(text) - 1))
        end = min(len(text), at + draw(st.integers(0, 12)))
        kind = draw(st.sampled_from(["delete", "duplicate", "insert", "swap-word"]))
        if kind == "delete":
            text = text[:at] + text[end:]
        elif kind == "duplicate":
            text = text[:end] + text[at:end] + text[end:]
        elif kind == "insert":
            piece = draw(
                st.sampled_from(
                    [
                        "item",
                        "item.x",
                        "steps.a.output",
                        "params.p",
                        "null",
                        "\\ud800",
                        '"',
                        "{",
                        "}",
                        "timeout = 1s",
                        "retry = 0",
                        "9" * 40,
                        "map ",
                        "# akmc: ignore[E203]",
                    ]
                )
            )
            text = text[:at] + piece + text[at:]
        else:
            words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)
            if words:
                text = text[:at] + draw(st.sampled_from(words)) + text[end:]
    return text


@pytest.fixture(scope="module")
def mutation_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mutated")
    shutil.copytree(REPO / "golden" / "corpus", root, dirs_exist_ok=True)
    (root / "child.akm").write_text(CHILD)
    return root


@pytest.mark.slow
@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=_mutated())
def test_mutated_shipped_sources(mutation_root: Path, source: str) -> None:
    (mutation_root / "workflows" / "mutant.akm").write_text(source, encoding="utf-8", errors="surrogatepass")
    event("checked clean" if _holds(mutation_root, "workflows/mutant.akm") else "diagnosed")


def test_the_item_fragment_of_the_language_reference_checks_clean(tmp_path: Path) -> None:
    page = (REPO / "docs" / "language.md").read_text()
    [fragment] = [f for f in re.findall(r"```akm fragment\n(.*?)```", page, re.S) if "item" in f]
    child = CHILD.replace("count: int = 1", "version: string").replace("params.count", "params.version")
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "deploy.akm").write_text(child)
    source = 'workflow "w" {\n  params { environments: list[{ name: string }]  version: string }\n' + fragment + "}\n"
    (tmp_path / "wf.akm").write_text(source)
    assert _holds(tmp_path, "wf.akm")
