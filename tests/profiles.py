"""Hypothesis profiles: `fast` (the default, what a contributor runs) and `thorough` (CI, through
`python3 tasks.py test` when `$CI` is set). A test states the example count it wants under the
thorough profile with `examples(n)`; the fast profile runs a fifth of it."""

from __future__ import annotations

from hypothesis import settings

THOROUGH = 100  # hypothesis's own default count: `examples(n)` is `n` under this profile

settings.register_profile("fast", max_examples=THOROUGH // 5, deadline=None)
settings.register_profile("thorough", max_examples=THOROUGH, deadline=None)
settings.load_profile("fast")


def examples(thorough: int) -> int:
    """The example count for a test that wants `thorough` examples under the thorough profile,
    scaled to the loaded profile (at least 5)."""
    loaded = settings.default
    assert loaded is not None  # a profile is always loaded (above, or by `--hypothesis-profile`)
    return max(5, thorough * loaded.max_examples // THOROUGH)
