"""The one error the AG-UI projection raises on purpose."""

from __future__ import annotations

__all__ = ("AguiObservationError",)


class AguiObservationError(ValueError):
    """A source item or a processor result cannot be projected consistently.

    Raised when thread or run correlation changes within one observer, when a multi-part part changes kind or
    identity, when a processor changes anything but an event's content fields, and when `observe()` or
    `resume()` is called in a state that does not allow it. It is a `ValueError` because in every case the
    value handed in is wrong, not the observer.
    """
