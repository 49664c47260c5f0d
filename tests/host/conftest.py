"""Fixtures of the host tests that execute demo runs in this process."""

from __future__ import annotations

import pytest

from runs.models import Thread
from tests.support import factories
from tests.support.host_runs import DEMO_TOOLS


@pytest.fixture
def demo_thread() -> Thread:
    return factories.thread(model="demo", tools=DEMO_TOOLS)


@pytest.fixture
def no_recovery_backoff(settings):
    """A recovery run may start as soon as the dead lane is closed."""
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0
