"""Declaring tools safe to run again after a crash: the engine's `recovery_retryable` and its metadata key.

The public home of the names a tool author imports (`from runs.harness.tools import recovery_retryable`); the
package root exports the same objects.
"""

from ._tools import RECOVERY_RETRY_SAFE_METADATA_KEY, recovery_retryable

__all__ = ("RECOVERY_RETRY_SAFE_METADATA_KEY", "recovery_retryable")
