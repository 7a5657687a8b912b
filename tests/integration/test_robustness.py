"""Whatever bytes arrive, the checker returns diagnostics and never raises."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from akm_run.params import ParamsError, collect
from akmc.cache import Cache
from akmc.compiler import check_file
from akmc.config import ConfigError, load
from helpers import LANGUAGE_EXAMPLE, source
from profiles import examples

SEED = (LANGUAGE_EXAMPLE / "workflows" / "release.akm").read_bytes()
TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b'"""',
    b"=",
    b"->",
    b"step",
    b"map",
    b"route",
    b"\n",
    b"\xff",
    b"1_",
    b"9" * 20,
]


def _check(data: bytes) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "akm.toml").write_text("")
        path = root / "wf.akm"
        path.write_bytes(data)
        result = check_file(path, "wf.akm")
        for diagnostic in result.report.diagnostics:
            assert diagnostic.span.line >= 1 and diagnostic.span.column >= 1
        return [d.code for d in result.report.diagnostics]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    _check(data)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, len(SEED)), st.integers(0, 40), st.sampled_from(TOKENS)),
        min_size=1,
        max_size=4,
    )
)
def test_mutated_sources(edits: list[tuple[int, int, bytes]]) -> None:
    data = SEED
    for position, cut, insert in edits:
        data = data[:position] + insert + data[position + cut :]
    _check(data)


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, len(SEED)))
def test_every_truncation(length: int) -> None:
    codes = _check(SEED[:length])
    if length < len(SEED.rstrip()):
        assert codes and codes[0] in {"E100", "E101"}


# -- the other inputs a user writes: akm.toml, --param values, suppression comments, cache entries --

TOML_PIECES = [
    "[check]\n",
    "[other]\n",
    "strict = ",
    "true\n",
    '"x"\n',
    "select = ",
    "ignore = ",
    '["W700"]\n',
    '["E9"]\n',
    "include = ",
    "exclude = ",
    '["../x"]\n',
    "[1, 2]\n",
    "= =\n",
    '"""\n',
    "\xff",
    "#c\n",
]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from(TOML_PIECES), max_size=8), st.text(max_size=30))
def test_any_akm_toml_loads_or_is_a_positioned_config_error(pieces: list[str], noise: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "akm.toml").write_text("".join(pieces) + noise, encoding="utf-8", errors="surrogatepass")
        try:
            load(root)
        except ConfigError as error:
            assert str(error).startswith(f"{root / 'akm.toml'}:")


SCHEMAS: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer"},
        {"type": "number"},
        {"type": "boolean"},
        {"enum": ["a", "b"]},
        {"type": "array", "items": {"type": "string"}},
        {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        {},
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(SCHEMAS, st.text(max_size=20))
def test_any_param_value_parses_or_is_a_params_error(schema: dict[str, Any], raw: str) -> None:
    try:
        params = collect({"p": {"schema": schema}}, [f"p={raw}"], None)
    except ParamsError:
        return
    assert set(params) == {"p"}


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="#akmc:ignore-file[]E2030W7, \n", max_size=60))
def test_any_suppression_comment_is_handled(comment: str) -> None:
    src = source("""
        workflow "w" {
          step a {
            shell "x"
            inputs = [steps.b.output]
          }
        }
    """)
    _check((src + "# " + comment.replace("\n", " ") + "\n").encode())


@settings(max_examples=examples(150), deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )
)
def test_any_cache_entry_is_used_or_ignored_never_trusted_blindly(entry: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "w.akm").write_text("x")
        cache = Cache(root, True)
        path = cache._entry_path("w.akm")
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(entry))
        assert cache.load("w.akm") is None  # a random document never carries this compiler's key
