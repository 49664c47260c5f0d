"""The signature a receiver checks: HMAC-SHA256, keyed by the webhook's secret, of `<timestamp>.<body>`.

The timestamp (Unix seconds, in X-Harness-Timestamp) is signed with the body, so a receiver that refuses old
timestamps (docs/alerts.md suggests five minutes) cannot be fed a recorded delivery again.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ("SIGNATURE_HEADER", "TIMESTAMP_HEADER", "signature", "signed_headers")

SIGNATURE_HEADER = "X-Harness-Signature"
TIMESTAMP_HEADER = "X-Harness-Timestamp"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def signed_headers(secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signature(secret, timestamp, body)}
