"""The migration that signs checkpoints: intact whole-state rows written before it are signed and become chain
bases; altered ones stay refused."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from pydantic_ai import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from runs.harness import HarnessState
from runs.models import Checkpoint, CheckpointKind, Thread
from runs.services.store import checkpoints
from tests.support import factories

pytestmark = pytest.mark.migrations


def two_round_state(thread: Thread) -> HarnessState:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("context")]),
        ModelRequest(parts=[UserPromptPart("question 0")]),
        ModelResponse(parts=[TextPart("answer 0")]),
        ModelRequest(parts=[UserPromptPart("question 1")]),
        ModelResponse(parts=[TextPart("answer 1")]),
    ]
    return HarnessState.new(thread_id=thread.thread_id, message_history=history)


@pytest.mark.django_db(transaction=True)
def test_the_migration_signs_intact_whole_state_checkpoints_and_keeps_altered_ones_refused():
    thread = factories.thread()
    executor = MigrationExecutor(connection)
    executor.migrate([("runs", "0003_tool_dispatch")])
    try:
        migrate_old_rows(executor, thread)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def migrate_old_rows(executor: MigrationExecutor, thread: Thread) -> None:
    old_apps = executor.loader.project_state([("runs", "0003_tool_dispatch")]).apps
    state = two_round_state(thread)
    state_json = state.model_dump_json()
    OldCheckpoint = old_apps.get_model("runs", "Checkpoint")
    intact = OldCheckpoint.objects.create(
        thread_id=thread.pk,
        kind="boundary",
        state_json=state_json,
        digest=hashlib.sha256(state_json.encode()).hexdigest(),
        pending_deferred_input={"kept": [1, 2]},
        metadata={},
    )
    altered = OldCheckpoint.objects.create(
        thread_id=thread.pk,
        kind="boundary",
        state_json=state_json.replace("question 1", "question X"),
        digest=hashlib.sha256(state_json.encode()).hexdigest(),
        metadata={},
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    migrated = Checkpoint.objects.get(pk=intact.pk)
    assert not migrated.is_delta and migrated.digest != hashlib.sha256(state_json.encode()).hexdigest()
    state_again, tip = checkpoints.load_chain(migrated)
    assert state_again == state
    with pytest.raises(checkpoints.CheckpointError, match="was altered"):
        checkpoints.load(Checkpoint.objects.get(pk=altered.pk))
    # A migrated checkpoint is a base new deltas chain onto.
    extended = state.with_changes(
        message_history=[*state.message_history, ModelRequest(parts=[UserPromptPart("more")])]
    )
    delta = checkpoints.create(thread, extended, kind=CheckpointKind.BOUNDARY, chain=checkpoints.CheckpointChain(tip))
    assert delta.parent_id == migrated.pk and checkpoints.load(delta) == extended
