"""Hypothesis profiles for the observer property tests.

"agui" (the default) keeps the whole project suite inside CI's time budget; set
`AGUI_HYPOTHESIS_PROFILE=thorough` to search many more generated runs after changing the conversion or the
generators. Neither profile is loaded globally, so other suites keep Hypothesis' own defaults.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# Generated runs are large by design (whole streams with children); slow generation is expected, not a bug.
_LARGE_RUNS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}

settings.register_profile("agui", max_examples=25, **_LARGE_RUNS)
settings.register_profile("thorough", max_examples=400, **_LARGE_RUNS)
