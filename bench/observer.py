"""Benchmark 2: the AG-UI observer.

`observe()` over a whole run (the worker's observer: `HarnessAguiStreamObserver(retain_events=False,
fragment=False)`) against pydantic-ai's own `AGUIEventStream.transform_stream` converting the same run's native
events; and `resume()` from the database journal (`journal.read_prefix`) against reading and decoding the same
stored rows only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from pydantic_ai.ui.ag_ui import AGUIEventStream

from observers.agui import HarnessAguiStreamObserver
from runs.harness import HarnessEvent, HarnessExtensionEvent

from .context import BenchContext
from .measure import Comparison, Report, Target, measure_pair, stopwatch
from .synthetic import SIZES, SyntheticRun, synthetic_run

__all__ = ("run",)

OBSERVE_TARGET = Target("slowdown", "<=", 1.5, "observe() within 1.5x of pydantic-ai's AG-UI event stream")
RESUME_TARGET = Target("slowdown", "<=", 3.0, "resume() within 3x of decode-only")


def _native_events(synthetic: SyntheticRun) -> list[Any]:
    return [
        item.event
        for item in synthetic.items
        if isinstance(item, HarnessEvent) and not isinstance(item.event, HarnessExtensionEvent)
    ]


def _observe_all(synthetic: SyntheticRun) -> float:
    observer = HarnessAguiStreamObserver(retain_events=False, fragment=False)
    with stopwatch() as elapsed:
        for item in synthetic.items:
            observer.observe(item)
    return elapsed()


def _adapter_all(synthetic: SyntheticRun, native: list[Any]) -> float:
    async def source() -> AsyncIterator[Any]:
        for event in native:
            yield event

    async def convert() -> float:
        stream = AGUIEventStream(thread_id=synthetic.thread_id, run_id=synthetic.run_id)
        with stopwatch() as elapsed:
            async for _ in stream.transform_stream(source()):
                pass
        return elapsed()

    return asyncio.run(convert())


def _resume(run: Any) -> float:
    from runs.services.store import journal

    async def rebuild() -> float:
        observer = HarnessAguiStreamObserver(retain_events=False, fragment=False)
        with stopwatch() as elapsed:
            await observer.resume(journal.read_prefix(run))
        return elapsed()

    return asyncio.run(rebuild())


def _decode_only(run: Any) -> float:
    from runs.harness import decode_item
    from runs.models import JournalEntry

    with stopwatch() as elapsed:
        rows = JournalEntry.objects.filter(run=run).order_by("index").values_list("payload", "codec_version")
        for payload, version in rows.iterator(chunk_size=2000):
            decode_item(payload, version)
    return elapsed()


def run(context: BenchContext) -> Report:
    from .host import discard, leased_run, seed_journal

    report = Report("observer", context.database, context.quick, context.repeats)
    for number, size in enumerate(context.sizes):
        # A warm-up before the first size only: later sizes run on warm code paths already.
        warmup = 1 if number == 0 else 0
        synthetic = synthetic_run(SIZES[size])
        native = _native_events(synthetic)
        subject, baseline = measure_pair(
            partial(_observe_all, synthetic),
            partial(_adapter_all, synthetic, native),
            context.repeats,
            warmup=warmup,
        )
        report.add(
            Comparison(
                name="observe",
                size=size,
                items=synthetic.size,
                subject=subject,
                baseline=baseline,
                baseline_name="pydantic-ai AGUIEventStream.transform_stream (native events only)",
                baseline_items=len(native),
                target=OBSERVE_TARGET,
            )
        )

        discard(synthetic.thread_id)
        run_row, _ = leased_run(synthetic.thread_id, synthetic.run_id)
        seed_journal(run_row, synthetic.encoded)
        subject, baseline = measure_pair(
            partial(_resume, run_row), partial(_decode_only, run_row), context.repeats, warmup=warmup
        )
        report.add(
            Comparison(
                name="resume",
                size=size,
                items=synthetic.size,
                subject=subject,
                baseline=baseline,
                baseline_name="read the same journal rows in one query and decode them (codec.decode_item)",
                target=RESUME_TARGET,
            )
        )
        discard(synthetic.thread_id)
    report.notes.append(
        "observe: per-item cost; the observer takes every item (native, extension, child), the adapter only the "
        "native pydantic-ai events of the same run (children included)."
    )
    return report
