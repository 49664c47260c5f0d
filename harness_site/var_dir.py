"""Prepare the Host's local directory (`HARNESS_VAR_DIR`): owner-only, with a generated secret key and the static
files root. `bin/setup`, `bin/run` and `bin/test` run `python -m harness_site.var_dir`; settings only read it.

The key is written once and never replaced (create_private), so processes started together agree on it.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from harness_site.private_files import create_private

SECRET_KEY_FILE = "secret_key"
STATIC_ROOT = "staticfiles"


def prepare_var_dir(var_dir: Path, *, secret_key: bool = True) -> None:
    var_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if secret_key:
        create_private(var_dir / SECRET_KEY_FILE, secrets.token_urlsafe(50).encode())
    (var_dir / STATIC_ROOT).mkdir(exist_ok=True)


if __name__ == "__main__":
    from harness_site import settings

    # Production takes SECRET_KEY from the environment only: no key file it would never read.
    prepare_var_dir(settings.HARNESS_VAR_DIR, secret_key=not settings.PRODUCTION)
