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

import datetime as dt
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
    sqlite = connection.vendor == "sqlite"
    if isinstance(field, models.DateTimeField):
        if sqlite and connection.timezone is dt.UTC:
            # What Django's adapter makes of a UTC datetime (naive UTC, as text), without its conversions: every
            # stream item's time is UTC, and this runs twice per streamed item.
            adapt = ops.adapt_datetimefield_value
            return lambda value: str(value.replace(tzinfo=None)) if value.tzinfo is dt.UTC else adapt(value)
        return ops.adapt_datetimefield_value
    if isinstance(field, models.JSONField):
        # Both backends encode through `json.dumps(value, cls=encoder)`; this encoder passes encoded text through.
        # mypy does not see a class as Hashable (python/mypy#11470).
        encoder = _verbatim_encoder(field.encoder)  # type: ignore[arg-type]
        if sqlite:
            # SQLite stores that text as it is, so encoded text needs no encoder at all.
            return lambda value: str(value) if type(value) is EncodedJson else ops.adapt_json_value(value, encoder)
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
    if adapters:
        rows = [_adapted(row, adapters) for row in rows]
    if connection.vendor == "postgresql":
        arrays = ", ".join(f"%b::{field.db_type(connection)}[]" for field in columns)
        by_column = [list(values) for values in zip(*rows, strict=True)]
        # Server-side binding, arrays in binary: Django's client-side cursor would quote every element as text.
        # Same connection, so the same transaction.
        connection.ensure_connection()
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            returned = ", ".join(quote(_name(_column(model, name))) for name in returning)
            tail = f" RETURNING {returned}" if returning else ""
            cursor.execute(f"{head}SELECT * FROM unnest({arrays}){tail}", by_column)
            return cursor.fetchall() if returning else []
    # SQLite: the driver's own placeholders on the driver's connection (the same transaction), since Django's
    # cursor rewrites every placeholder of a statement with a regular expression first. Errors are Django's.
    # The driver releases the GIL around each step of a statement, and `executemany` or a RETURNING clause take
    # one step per row: a worker's event loop then waits for the GIL back once per row. So rows go in as multi-row
    # INSERTs (one step each), and what `returning` asks for comes back as one JSON row, read after the insert.
    connection.ensure_connection()
    database = connection.connection
    mark = f"({', '.join(['?'] * len(columns))})"
    table = quote(meta.db_table)
    limit = connection.features.max_query_params
    assert limit is not None, "SQLite limits the parameters of a statement"
    per_statement = max(1, limit // len(columns))
    with connection.wrap_database_errors:
        if returning:
            # New rows get keys above every existing one (AUTOINCREMENT), and the transaction's write lock keeps
            # anyone else from inserting meanwhile, so the new rows are exactly those above the largest key now.
            assert connection.in_atomic_block, "insert_rows(returning=...) runs inside a transaction on SQLite"
            key = quote(_name(meta.pk))
            ((before,),) = database.execute(f"SELECT coalesce(max({key}), 0) FROM {table}").fetchall()
        for start in range(0, len(rows), per_statement):
            chunk = rows[start : start + per_statement]
            database.execute(f"{head}VALUES {', '.join([mark] * len(chunk))}", [v for row in chunk for v in row])
        if not returning:
            return []
        wanted = ", ".join(quote(_name(_column(model, name))) for name in returning)
        ((found,),) = database.execute(
            f"SELECT json_group_array(json_array({wanted})) FROM {table} WHERE {key} > ?", [before]
        ).fetchall()
    return [tuple(values) for values in json.loads(found)]


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
