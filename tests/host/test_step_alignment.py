"""The step alignment of the compare view, pure: two runs' steps lined up and their first divergence."""

from __future__ import annotations

import pytest

from runs.services.reports.step_alignment import StepSummary, align, difference

LOOKUP = StepSummary("tool_call", "lookup_record", '{"record_id": "REC-7"}')
RESULT = StepSummary("tool_result", "lookup_record", text="REC-7: status=active")
ANSWER = StepSummary("message", text="REC-7 is active.")
END = StepSummary("end", "success")


def test_equal_runs_have_no_divergence_whatever_their_positions_and_argument_spacing():
    a = [LOOKUP, RESULT, ANSWER, END]
    b = [
        StepSummary("tool_call", "lookup_record", '{ "record_id":"REC-7" }', position=40),
        StepSummary("tool_result", "lookup_record", text="REC-7: status=active", position=41),
        StepSummary("message", text="REC-7 is active.", position=44),
        StepSummary("end", "success", position=45),
    ]

    alignment = align(a, b)

    assert alignment.equal and alignment.divergence is None
    assert [(row.number, row.difference) for row in alignment.rows] == [(1, None), (2, None), (3, None), (4, None)]


def test_a_different_tool_is_the_first_divergence():
    search = StepSummary("tool_call", "search_records", '{"query": "acme"}')

    alignment = align([LOOKUP, RESULT, ANSWER], [search, RESULT, StepSummary("message", text="Nothing found.")])

    assert alignment.first_divergence == 0
    assert alignment.divergence.difference.kind == "tool"
    assert alignment.divergence.difference.detail == "a different tool: lookup_record in run A, search_records in run B"


def test_different_arguments_name_the_keys_that_differ():
    other = StepSummary("tool_call", "lookup_record", '{"record_id": "REC-8"}')

    alignment = align([ANSWER, LOOKUP, RESULT], [ANSWER, other, RESULT])

    assert alignment.first_divergence == 1
    assert alignment.divergence.number == 2
    assert (alignment.divergence.difference.kind, alignment.divergence.difference.detail) == (
        "arguments",
        "different arguments: record_id",
    )
    # Later rows are still compared, each on its own.
    assert alignment.rows[2].difference is None


def test_different_text_says_from_which_character():
    alignment = align([LOOKUP, RESULT, ANSWER], [LOOKUP, RESULT, StepSummary("message", text="REC-7 is archived.")])

    assert alignment.first_divergence == 2
    assert alignment.divergence.difference.kind == "text"
    assert alignment.divergence.difference.detail == "different text from character 11"


def test_a_different_result_and_a_different_kind_of_step():
    assert (
        difference(RESULT, StepSummary("tool_result", "lookup_record", text="not found")).detail == "a different result"
    )
    assert difference(ANSWER, LOOKUP).detail == "a message in run A, a tool call in run B"
    assert difference(END, StepSummary("end", "interrupt")).detail == "success in run A, interrupt in run B"
    assert (
        difference(StepSummary("error", "replay_diverged", text="x"), StepSummary("error", "replay_diverged", text="x"))
        is None
    )


def test_one_run_longer_than_the_other_diverges_where_the_shorter_ends():
    alignment = align([LOOKUP, RESULT, ANSWER, END], [LOOKUP, RESULT])

    assert alignment.first_divergence == 2
    assert [row.b for row in alignment.rows[2:]] == [None, None]
    assert alignment.divergence.difference.detail == "only in run A"
    assert align([LOOKUP], [LOOKUP, RESULT]).divergence.difference.detail == "only in run B"


def test_steps_taken_over_as_history_are_shared_and_the_comparison_starts_after_them():
    # Run B went on from a checkpoint of run A after its first two steps, then answered differently.
    fork = [StepSummary("message", text="REC-7 was archived today.")]

    alignment = align([LOOKUP, RESULT, ANSWER], fork, shared_a=2)

    assert [row.shared for row in alignment.rows] == [True, True, False]
    assert [row.b for row in alignment.rows[:2]] == [None, None] and alignment.rows[2].b == fork[0]
    assert alignment.first_divergence == 2
    assert alignment.divergence.difference.detail == "different text from character 7"
    assert align([LOOKUP, RESULT], [LOOKUP, RESULT, ANSWER], shared_b=3).rows[0].a is None


def test_only_one_run_can_have_gone_on_from_the_other():
    with pytest.raises(ValueError, match="only one"):
        align([LOOKUP], [LOOKUP], shared_a=1, shared_b=1)
