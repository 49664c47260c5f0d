import pytest

from tests.support.browser import log_in


@pytest.fixture
def operator_page(live_stack, operator_user, page):
    """A Chromium page logged in as the operator, against the live stack."""
    log_in(page, live_stack.base_url, "op", "op-password-1")
    return page
