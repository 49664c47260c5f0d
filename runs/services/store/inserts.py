"""Multi-row INSERTs for the worker's hot path, without a model instance per row.

`bulk_create` builds and prepares a model instance for every journal and timeline row; on the write path that
costs more than the database itself. Here a row is a tuple of field values, adapted for the backend only where
a column needs it (datetimes, JSON). On PostgreSQL the rows go as one array per column into a single `INSERT
... SELECT * FROM unnest(...)`: a multi-row VALUES list would have psycopg's client-side binding parse a
statement with thousands of placeholders for every batch, which cost more than the database itself. On SQLite
they go straight to the driver (`executemany`, or multi-row INSERTs within the parameter limit where the new
rows' columns are returned). Constraints are the table's own, so a row the database refuses fails the whole
surrounding transaction exactly as with `bulk_create`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from django.db import connection, models

__all__ = ("EncodedJson", "insert_rows")


class EncodedJson(str):
    """JSON text already encoded for a JSON column: stored as it is instead of being encoded again."""

    __slots__ = ()


@functools.cache
def _verbatim_encoder(encoder: type[json.JSONEncoder] | None) -> type[json.JSONEncoder]:
    base = encoder or json.JSONEncoder

    # A base class only known at run time: mypy takes no variable for a base class.
    class Verbatim(base):  # type: ignore[valid-type,misc]
        def encode(self, o: Any) -> str:
            return str(o) if isinstance(o, EncodedJson) else super().encode(o)

    return Verbatim


def _adapter(field: models.Field[Any, Any]) -> Callable[[Any], Any] | None:
    ops = connection.ops
    if isinstance(field, models.DateTimeField):
        return ops.adapt_datetimefield_value
    if isinstance(field, models.JSONField):
        # Both backends encode through `json.dumps(value, cls=encoder)`; this encoder passes encoded text through.
        # mypy does not see a class as Hashable (python/mypy#11470).
        encoder = _verbatim_encoder(field.encoder)  # type: ignore[arg-type]
        return lambda value: ops.adapt_json_value(value, encoder)
    return None


def insert_rows(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    returning: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """Insert `rows` (values in the order of `fields`); the `returning` columns of the new rows, in any order."""
    if not rows:
        return []
    meta = model._meta
    quote = connection.ops.quote_name
    columns = [_column(model, name) for name in fields]
    adapters = [(position, adapt) for position, field in enumerate(columns) if (adapt := _adapter(field))]
    head = f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(_name(field)) for field in columns)}) "
    tail = f" RETURNING {', '.join(quote(_name(_column(model, name))) for name in returning)}" if returning else ""
    if adapters:
        rows = [_adapted(row, adapters) for row in rows]
    if connection.vendor == "postgresql":
        arrays = ", ".join(f"%b::{field.db_type(connection)}[]" for field in columns)
        by_column = [list(values) for values in zip(*rows, strict=True)]
        # Server-side binding, arrays in binary: Django's client-side cursor would quote every element as text.
        # Same connection, so the same transaction.
        connection.ensure_connection()
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(f"{head}SELECT * FROM unnest({arrays}){tail}", by_column)
            return cursor.fetchall() if returning else []
    # SQLite: the driver's own placeholders on the driver's connection (the same transaction), since Django's
    # cursor rewrites every placeholder of a statement with a regular expression first. Errors are Django's.
    connection.ensure_connection()
    database = connection.connection
    mark = f"({', '.join(['?'] * len(columns))})"
    returned: list[tuple[Any, ...]] = []
    with connection.wrap_database_errors:
        if not returning:
            database.executemany(f"{head}VALUES {mark}", rows)
            return returned
        limit = connection.features.max_query_params
        assert limit is not None, "SQLite limits the parameters of a statement"
        per_statement = max(1, limit // len(columns))
        for start in range(0, len(rows), per_statement):
            chunk = rows[start : start + per_statement]
            values = ", ".join([mark] * len(chunk))
            returned += database.execute(f"{head}VALUES {values}{tail}", [v for row in chunk for v in row]).fetchall()
    return returned


def _column(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field), f"{name} is the far side of a relation, not a column"
    return field


def _name(field: models.Field[Any, Any]) -> str:
    assert field.column is not None, f"{field.name} has no column"
    return field.column


def _adapted(row: Sequence[Any], adapters: list[tuple[int, Callable[[Any], Any]]]) -> list[Any]:
    adapted = list(row)
    for position, adapt in adapters:
        adapted[position] = adapt(adapted[position])
    return adapted
