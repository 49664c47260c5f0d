"""HarnessState envelope, serialisation and fork (spec 5.1, 5.2)."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_ai import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)

from runs.harness import (
    SUBAGENTS_NAMESPACE,
    AgentContextStateSnapshot,
    CapabilityState,
    EnvironmentState,
    HarnessState,
    HistoryEncoder,
    RetainedChild,
    RetainedChildren,
)

HISTORY: list[ModelMessage] = [
    ModelRequest(parts=[UserPromptPart("plan the trip")]),
    ModelResponse(parts=[TextPart("Looking it up"), ToolCallPart("lookup", {"q": "x"}, tool_call_id="c1")]),
]


def full_state(**extra: object) -> HarnessState:
    state = HarnessState.new(
        thread_id="thr_productthread1",
        message_history=HISTORY,
        agent_context_state=AgentContextStateSnapshot(
            entries={"acme.counter": CapabilityState(version="1", data={"value": 1})}
        ),
        environment_states={"main": EnvironmentState(provider_key="local", state_version="1", state={"cwd": "/"})},
    )
    return HarnessState.model_validate({**state.model_dump(mode="json"), **extra})


def test_json_round_trip_keeps_everything_including_unknown_fields():
    """T1: dump/validate round trip is exact and the JSON has exactly the documented keys plus extras."""
    state = full_state(future_field={"from": "a newer harness"})
    payload = state.model_dump_json()
    restored = HarnessState.model_validate_json(payload)

    assert restored == state
    assert restored.message_history == state.message_history
    assert restored.model_extra == {"future_field": {"from": "a newer harness"}}
    assert set(json.loads(payload)) == {
        "schema_version",
        "thread_id",
        "agent_context_state",
        "refs",
        "message_history",
        "environment_states",
        "future_field",
    }
    assert json.loads(payload)["agent_context_state"] == {
        "entries": {"acme.counter": {"version": "1", "data": {"value": 1}}}
    }


@pytest.mark.parametrize(
    "change",
    [{"schema_version": "2"}, {"thread_id": None}],
    ids=["newer-schema", "missing-thread-id"],
)
def test_unsupported_schema_or_missing_thread_id_is_rejected(change):
    """T2: validation fails and no thread id is invented."""
    data = json.loads(full_state().model_dump_json())
    data.update(change)
    data = {key: value for key, value in data.items() if value is not None}
    with pytest.raises(ValidationError):
        HarnessState.model_validate_json(json.dumps(data))


@pytest.mark.parametrize("thread_id", ["thread-" + "a1" * 16, "thr_x1", "thread_abc"])
def test_thread_id_grammar_accepts(thread_id):
    """T3: accepted thread ids."""
    assert HarnessState.new(thread_id=thread_id).thread_id == thread_id


@pytest.mark.parametrize("thread_id", ["Thr_x", "thr-1", "thread-" + "AB" * 16, "x_", "a_" + "b" * 256, ""])
def test_thread_id_grammar_rejects(thread_id):
    """T3: rejected thread ids."""
    with pytest.raises(ValidationError):
        HarnessState.new(thread_id=thread_id)


def test_state_is_frozen() -> None:
    """T4."""
    state = HarnessState.new(thread_id="thr_x1")
    with pytest.raises(ValidationError):
        state.thread_id = "thr_x2"  # type: ignore[misc]  # writing a frozen field is the point


def test_mutating_returned_values_does_not_change_the_state():
    """T5: history, namespaces and environment states are detached copies."""
    state = full_state()
    history = list(state.message_history)
    history.clear()
    state.message_history[0].parts.clear()
    entries = state.agent_context_state.entries
    entries["acme.counter"].data["value"] = 99
    entries.clear()
    envs = state.environment_states
    envs.clear()

    assert state.message_history == tuple(full_state().message_history)
    assert state.agent_context_state.get("acme.counter").data == {"value": 1}
    assert set(state.environment_states) == {"main"}


def test_unknown_fields_cannot_be_changed_through_the_state_or_the_input_it_was_built_from():
    """S32/S35: extras are deeply immutable, like everything else a state holds."""
    given = {"future_field": {"items": [1, 2]}}
    state = full_state(**given)
    given["future_field"]["items"].append("input changed")
    state.future_field["items"].append("attribute changed")
    state.model_extra["future_field"]["items"].append("model_extra changed")
    state.model_extra.clear()

    assert state.future_field == {"items": [1, 2]}
    assert json.loads(state.model_dump_json())["future_field"] == {"items": [1, 2]}
    assert json.loads(state.fork().model_dump_json())["future_field"] == {"items": [1, 2]}


def test_unknown_fields_must_be_strict_json():
    with pytest.raises(ValidationError):
        full_state(future_field=float("nan"))


def test_python_mode_round_trip_is_exact():
    """S35: `model_validate(model_dump())` rebuilds the same state, binary content included."""
    state = full_state(future_field=[1, {"a": None}]).with_changes(
        message_history=[
            *HISTORY,
            ModelRequest(parts=[UserPromptPart(["see", BinaryContent(b"\x00\xff", media_type="image/png")])]),
        ]
    )

    restored = HarnessState.model_validate(state.model_dump())

    assert restored == state
    assert restored.message_history[-1].parts[0].content[1].data == b"\x00\xff"


def test_invalid_history_is_rejected():
    """T6: an unknown part kind fails with an invalid-history error."""
    data = json.loads(full_state().model_dump_json())
    data["message_history"][0]["parts"][0]["part_kind"] = "mystery"
    with pytest.raises(ValidationError, match="invalid message history"):
        HarnessState.model_validate_json(json.dumps(data))


@pytest.mark.parametrize("data", [float("nan"), {"x": float("inf")}])
def test_non_finite_capability_data_is_rejected(data):
    """T7."""
    with pytest.raises(ValidationError):
        CapabilityState(version="1", data=data)


def test_non_finite_capability_data_in_json_is_rejected():
    """T7: the JSON path refuses NaN too."""
    payload = (
        '{"schema_version":"1","thread_id":"thr_x1","agent_context_state":{"entries":{"a":{"version":"1","data":NaN}}}}'
    )
    with pytest.raises(ValidationError):
        HarnessState.model_validate_json(payload)


@pytest.mark.parametrize("capability_id", ["", "   "])
def test_blank_capability_id_is_rejected(capability_id):
    """T7."""
    with pytest.raises(ValidationError):
        AgentContextStateSnapshot(entries={capability_id: CapabilityState(version="1", data=1)})


def test_dump_has_no_private_encoded_fields():
    """T8."""
    payload = full_state().model_dump_json()
    assert "_json" not in payload
    assert "delta" not in payload


def test_new_without_id_generates_an_empty_thread():
    """T9."""
    state = HarnessState.new()
    assert re.fullmatch(r"thread_[0-9a-f]{32}", state.thread_id)
    assert state.message_history == ()
    assert state.agent_context_state.entries == {}
    assert state.environment_states == {}
    assert state.refs == ()
    assert HarnessState.new(thread_id="thr_productthread1").thread_id == "thr_productthread1"


def test_fork_copies_continuation_and_clears_environment():
    """T13: same history, namespaces, refs and extras; no environment state; source unchanged."""
    state = full_state(future_field=[1, 2])
    before = state.model_dump_json()
    branch = state.fork(thread_id="thr_productbranch1")

    assert branch.thread_id == "thr_productbranch1"
    assert branch.thread_id != state.thread_id
    assert branch.message_history == state.message_history
    assert branch.agent_context_state == state.agent_context_state
    assert branch.refs == state.refs
    assert branch.model_extra == {"future_field": [1, 2]}
    assert branch.environment_states == {}
    assert state.model_dump_json() == before


def test_fork_without_id_generates_one():
    """T14."""
    state = full_state()
    branch = state.fork()
    assert re.fullmatch(r"thread_[0-9a-f]{32}", branch.thread_id)
    assert branch.thread_id != state.thread_id


def test_fork_refuses_same_or_invalid_id():
    """T15."""
    state = full_state()
    with pytest.raises(ValueError, match="different"):
        state.fork(thread_id=state.thread_id)
    with pytest.raises(ValidationError):
        state.fork(thread_id="Bad-ID")


def _with_children(state: HarnessState) -> HarnessState:
    child = HarnessState.new(thread_id="thr_child1", message_history=HISTORY)
    retained = RetainedChildren(
        children={
            "researcher": RetainedChild(thread_id="thr_child1", state=child.model_dump(mode="json")),
            "writer": RetainedChild(
                thread_id="thr_child2", state=child.fork(thread_id="thr_child2").model_dump(mode="json")
            ),
        }
    )
    entries = state.agent_context_state.entries
    entries[SUBAGENTS_NAMESPACE] = CapabilityState(version="1", data=retained.model_dump(mode="json"))
    return state.with_changes(agent_context_state=AgentContextStateSnapshot(entries=entries))


def test_fork_rethreads_retained_inline_children():
    """T16: each retained child gets a fresh thread id; the rest of the namespace is unchanged."""
    state = _with_children(full_state())
    branch = state.fork(thread_id="thr_productbranch1")

    source_children = RetainedChildren.model_validate(state.agent_context_state.get(SUBAGENTS_NAMESPACE).data)
    branch_children = RetainedChildren.model_validate(branch.agent_context_state.get(SUBAGENTS_NAMESPACE).data)
    assert set(branch_children.children) == {"researcher", "writer"}
    for name, child in branch_children.children.items():
        source = source_children.children[name]
        assert child.thread_id != source.thread_id
        assert child.state == source.state
        loaded = child.load_state()
        assert loaded.thread_id == child.thread_id
        assert loaded.message_history == source.load_state().message_history
    assert branch.agent_context_state.get("acme.counter") == state.agent_context_state.get("acme.counter")


def test_hand_edited_thread_id_validates_but_only_fork_rethreads():
    """T18: the envelope cannot detect hand edits; fork is the sanctioned identity change."""
    state = _with_children(full_state())
    edited = json.loads(state.model_dump_json())
    edited["thread_id"] = "thr_handedited1"
    hand = HarnessState.model_validate(edited)
    fork = state.fork(thread_id="thr_handedited1")

    assert hand.thread_id == fork.thread_id
    assert hand.environment_states != {}
    assert fork.environment_states == {}
    assert hand.agent_context_state.get(SUBAGENTS_NAMESPACE) == state.agent_context_state.get(SUBAGENTS_NAMESPACE)
    assert fork.agent_context_state.get(SUBAGENTS_NAMESPACE) != state.agent_context_state.get(SUBAGENTS_NAMESPACE)


def test_seed_samples_serialize_and_fork():
    """The contract's samples "Serialising state" and "Forking a Thread", as written."""
    state = full_state()
    payload = state.model_dump_json()
    restored = HarnessState.model_validate_json(payload)
    assert restored == state

    branch_state = state.fork(thread_id="thr_productbranch1")
    assert branch_state.thread_id != state.thread_id
    assert branch_state.message_history == state.message_history


def test_the_dump_writes_the_kept_history_bytes_exactly_where_pydantic_would():
    for state in (
        full_state(future_field={"from": "a newer harness"}, zz_last=[1, "é"]),
        HarnessState.new(thread_id="thr_empty"),
        HarnessState.new(thread_id="thr_unicode", message_history=[ModelRequest(parts=[UserPromptPart("naïve ☃")])]),
    ):
        assert state.model_dump_json() == BaseModel.model_dump_json(state)
        assert HarnessState.model_validate_json(state.model_dump_json()) == state


def test_the_history_encoder_matches_pydantic_and_reencodes_only_what_changed():
    encoded: list[object] = []
    message_json = TypeAdapter(ModelMessage).dump_json
    encoder = HistoryEncoder(encode_message=lambda message: encoded.append(message) or message_json(message))
    history: list[ModelRequest | ModelResponse] = []
    for number in range(4):
        history += [
            ModelRequest(parts=[UserPromptPart(f"question {number}")]),
            ModelResponse(parts=[TextPart(f"answer {number}")]),
        ]
        assert encoder.encode(history) == ModelMessagesTypeAdapter.dump_json(history)
    # The last message may still be completed in place; an earlier one replaced by a new object is re-encoded.
    history[-1].parts.append(TextPart("more"))
    history[1] = ModelResponse(parts=[TextPart("rewritten")])
    encoded.clear()
    assert encoder.encode(history) == ModelMessagesTypeAdapter.dump_json(history)
    assert encoded == history[1:]
    encoded.clear()
    assert encoder.encode(history[:3]) == ModelMessagesTypeAdapter.dump_json(history[:3])
    assert encoded == []
    with pytest.raises(ValueError, match="not a model message"):
        encoder.encode([*history, "text"])
