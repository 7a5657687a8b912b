"""Whatever bytes arrive, the checker returns diagnostics and never raises."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from akmc.compiler import check_file
from conftest import LANGUAGE_EXAMPLE

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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    _check(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


@settings(max_examples=60, deadline=None)
@given(st.integers(0, len(SEED)))
def test_every_truncation(length: int) -> None:
    codes = _check(SEED[:length])
    if length < len(SEED.rstrip()):
        assert codes and codes[0] in {"E100", "E101"}
