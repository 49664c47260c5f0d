"""A user's saved views of the executions list: a name and the list's query string, theirs alone.

An anonymous user has none. A view holds only the query string, never rows: opening it asks again, with the
viewer's teams of that moment.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from runs.models import SavedView

__all__ = ("MAX_SAVED_VIEWS", "SavedViewRefused", "delete_view", "save_view", "views_of")

MAX_SAVED_VIEWS = 30
"""Each is a link in the nav; more would not fit there."""


class SavedViewRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def views_of(user: User | AnonymousUser) -> QuerySet[SavedView]:
    if isinstance(user, AnonymousUser):
        return SavedView.objects.none()
    return SavedView.objects.filter(user=user).order_by("name")


def save_view(user: User | AnonymousUser, name: str, query: str) -> SavedView:
    """Save `query` under `name`, replacing the user's view of that name if there is one."""
    if isinstance(user, AnonymousUser):
        raise SavedViewRefused("Log in to save a view.")
    mine = views_of(user)
    if not mine.filter(name=name).exists() and mine.count() >= MAX_SAVED_VIEWS:
        raise SavedViewRefused(f"You have {MAX_SAVED_VIEWS} saved views, the most there can be; delete one first.")
    # Two saves of one name at once: Django's update_or_create retries the lookup when the insert meets the other.
    view, _ = SavedView.objects.update_or_create(user=user, name=name, defaults={"query": query})
    return view


def delete_view(user: User | AnonymousUser, pk: int) -> bool:
    """Delete the user's view `pk`; False if they have none of that pk (another user's is not theirs to delete)."""
    deleted, _ = views_of(user).filter(pk=pk).delete()
    return bool(deleted)
