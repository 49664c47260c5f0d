"""Holds: a thread or an execution that retention must keep, whatever its team policy says (a legal hold, a
case under investigation). A held thread holds all its executions; who put it on hold, and when, is kept."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import timezone

from runs.models import Execution, ExecutionTombstone, Thread

__all__ = ("HoldRefused", "set_hold")


class HoldRefused(Exception):
    pass


def set_hold(target: Thread | Execution, *, held: bool, user: AbstractBaseUser | AnonymousUser) -> None:
    """Put `target` on hold or release it. An execution already purged has nothing left to hold: refused."""
    if held and isinstance(target, Execution) and ExecutionTombstone.objects.filter(execution=target).exists():
        raise HoldRefused("This execution was already purged by retention; there is nothing left to hold.")
    target.held_at = timezone.now() if held else None
    target.held_by_id = user.pk if held and user.is_authenticated else None
    target.save(update_fields=["held_at", "held_by"])
