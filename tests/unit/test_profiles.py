"""The hypothesis profiles scale every test's example count: a fifth by default, all of it in CI."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO


def _examples(profile: str | None, wanted: int) -> int:
    load = f"settings.load_profile({profile!r}); " if profile else ""
    code = f"import profiles; from hypothesis import settings; {load}print(profiles.examples({wanted}))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO / "tests", capture_output=True, text=True, check=True
    )
    return int(result.stdout)


def test_the_fast_profile_is_the_default_and_runs_a_fifth_of_each_count() -> None:
    assert _examples(None, 1000) == 200
    assert _examples(None, 10) == 5  # never fewer than five


def test_the_thorough_profile_runs_each_count_as_written() -> None:
    assert _examples("thorough", 1000) == 1000
