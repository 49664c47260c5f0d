"""How many examples a property test runs: what its decorator names in the full lane, a fifth of it (at least 5)
under `bin/test --fast`, which loads the "fast" profile (tests/conftest.py). The edit-test loop still runs every
property; the full lane, and CI, keep each at full strength."""

from __future__ import annotations

from hypothesis import settings

FAST_PROFILE = "fast"
FAST_SHARE = 5
FAST_FLOOR = 5

# Property tests without settings of their own get a fifth of Hypothesis' default 100 too.
settings.register_profile(FAST_PROFILE, max_examples=100 // FAST_SHARE)


def examples(full: int) -> int:
    if settings.get_current_profile_name() != FAST_PROFILE:
        return full
    return max(FAST_FLOOR, full // FAST_SHARE)
