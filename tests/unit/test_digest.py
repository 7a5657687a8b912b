"""Tagged hashes (akm_run.digest): the `sha256:` form of every hash in a plan."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from akm_run.digest import tagged_sha256
from akm_run.planformat import SHA256


@given(st.binary(max_size=256))
def test_tagged_hashes_are_sha256_in_the_plan_formats_form(data: bytes) -> None:
    tagged = tagged_sha256(data)
    assert SHA256.fullmatch(tagged) and tagged == "sha256:" + hashlib.sha256(data).hexdigest()
