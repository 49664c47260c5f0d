"""The hot path's multi-row inserts: the columns asked back belong to exactly the new rows, across statements, and
the adapters that skip Django's conversions store what Django's would."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection, transaction
from django.utils import timezone

from runs.models import JournalEntry, TimelineEvent
from runs.services.store.inserts import EncodedJson, _adapter, insert_rows
from tests.support import factories

pytestmark = pytest.mark.django_db

FIELDS = ("run", "index", "source_run_id", "source_sequence", "kind", "occurred_at", "payload", "codec_version")


def _rows(run_pk: int, first: int, count: int) -> list[tuple]:
    now = timezone.now()
    return [(run_pk, i, "source", i, "part_delta", now, f'{{"n":{i}}}', 3) for i in range(first, first + count)]


def test_the_new_rows_columns_come_back_even_when_the_rows_take_several_statements():
    run, _ = factories.leased_run()
    with transaction.atomic():
        before = insert_rows(JournalEntry, FIELDS, _rows(run.pk, 0, 5), returning=("id", "index"))
        # More parameters than one statement may carry (999 on SQLite): several INSERTs, one answer.
        returned = insert_rows(JournalEntry, FIELDS, _rows(run.pk, 5, 1500), returning=("id", "index"))
    stored = dict(JournalEntry.objects.filter(run=run).values_list("index", "id"))
    assert sorted((index, pk) for pk, index in before + returned) == sorted(stored.items())
    assert sorted(index for _, index in returned) == list(range(5, 1505))


def test_rows_without_returning_go_in_whole_and_in_order():
    run, _ = factories.leased_run()
    insert_rows(JournalEntry, FIELDS, _rows(run.pk, 0, 1200))
    indexes = list(JournalEntry.objects.filter(run=run).order_by("id").values_list("index", flat=True))
    assert indexes == list(range(1200))


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the returning path reads back by key on SQLite only")
@pytest.mark.django_db(transaction=True)
def test_asking_for_columns_back_outside_a_transaction_is_refused_on_sqlite():
    run, _ = factories.leased_run()
    with pytest.raises(AssertionError, match="inside a transaction"):
        insert_rows(JournalEntry, FIELDS, _rows(run.pk, 0, 1), returning=("id",))
    assert not JournalEntry.objects.filter(run=run).exists()


@pytest.mark.parametrize(
    "moment",
    [
        dt.datetime(2026, 12, 2, 16, 52, 46, 240611, tzinfo=dt.UTC),
        dt.datetime(2026, 12, 2, 16, 52, 46, tzinfo=dt.UTC),
        dt.datetime(2026, 12, 2, 18, 52, 46, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    ],
)
def test_a_datetime_is_adapted_as_django_adapts_it(moment):
    connection.ensure_connection()
    adapt = _adapter(JournalEntry._meta.get_field("occurred_at"))
    assert adapt is not None
    assert adapt(moment) == connection.ops.adapt_datetimefield_value(moment)


def test_json_is_stored_as_encoded_or_as_django_encodes_it():
    run, _ = factories.leased_run()
    fields = ("execution", "position", "run", "subagent_run_id", "origin", "event_type", "event", "occurred_at")
    now = timezone.now()
    values = [EncodedJson('{"type":"RAW","delta":"a"}'), {"type": "RAW", "delta": "b"}]
    rows = [(run.execution_id, n, run.pk, "", "run", "RAW", value, now) for n, value in enumerate(values, start=1)]
    insert_rows(TimelineEvent, fields, rows)
    stored = list(TimelineEvent.objects.filter(run=run).order_by("position").values_list("event", flat=True))
    assert stored == [{"type": "RAW", "delta": "a"}, {"type": "RAW", "delta": "b"}]
