"""Importing a run bundle as a read-only copy: every row written in one transaction, or none.

The bundle is checked whole first (`store.bundle_format.read_bundle`: size, zip, members, hashes, signature,
format version), then its rows: a journal row of a newer codec, an execution still under way, a thread id already
used in the target team, a run id already used on this Host, or a reference to a row the bundle does not hold is
refused with nothing written. Rows get new primary keys; every reference is mapped.

What the copy is built on:
- its threads are marked `imported_by` the `BundleTransfer` of the import, so no execution starts on them;
- the policy versions it used become versions of the target team's policy, numbered after its latest, with a
  comment naming where they came from; the team's current version does not change;
- its profile is the target team's profile of the same name, else a new one from the bundle;
- checkpoint digests are computed again with this Host's key (the bundle's signature vouches for the content), so
  a full bundle's checkpoints load and can be forked from; a redacted bundle's checkpoints hold no state;
- who decided or cancelled was a user of another Host: the names are not mapped to users here;
- a what-if keeps its change (checked as the Host checks an operator's, so a tampered one is refused) and its link
  to its original when the bundle holds that (older bundles have neither: their what-ifs import as plain forks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import IO, Any

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Max, Model
from django.utils.dateparse import parse_datetime

from runs.harness import CODEC_VERSION
from runs.models import (
    ACTIVE_EXECUTION_STATUSES,
    AgentProfile,
    BundleDirection,
    BundleMode,
    BundleTransfer,
    Checkpoint,
    Decision,
    DecisionSubmission,
    DeferredRequest,
    Execution,
    HostPolicyVersion,
    JournalEntry,
    Run,
    Team,
    Thread,
    TimelineEvent,
    ToolDispatch,
)

from ..store import POLICY_VERSION_FIELDS
from ..store.bundle_format import BundleContents, BundleError, read_bundle
from ..store.checkpoints import digest_of
from ..store.inserts import insert_rows
from ..store.what_if import WhatIfRefused, parse_change
from .executions import current_policy_version

__all__ = ("import_bundle",)

_BATCH = 2000


class _Ids:
    """The new primary key of each row of the bundle, by member; a reference to a row it lacks is refused."""

    def __init__(self) -> None:
        self._maps: dict[str, dict[int, int]] = {}

    def add(self, member: str, old: int, new: int) -> None:
        self._maps.setdefault(member, {})[old] = new

    def of(self, member: str, old: Any) -> int:
        try:
            return self._maps[member][old]
        except KeyError:
            raise BundleError(f"the bundle refers to a row of {member} ({old!r}) that it does not hold") from None

    def optional(self, member: str, old: Any) -> int | None:
        return None if old is None else self.of(member, old)

    def holds(self, member: str, old: Any) -> bool:
        return old in self._maps.get(member, {})


def _when(value: Any) -> datetime | None:
    if value is None:
        return None
    return _moment(value)


def _moment(value: Any) -> datetime:
    moment = parse_datetime(value) if isinstance(value, str) else None
    if moment is None:
        raise BundleError(f"the bundle holds a time that is not ISO 8601: {value!r}")
    return moment


def _insert_one(model: type[Model], row: dict[str, Any]) -> int:
    # A column left out is NULL: a JSON column given None would hold the JSON `null` instead.
    given = {name: value for name, value in row.items() if value is not None}
    ((pk,),) = insert_rows(model, list(given), [list(given.values())], returning=("id",))
    return int(pk)


def _insert_many(model: type[Model], fields: Sequence[str], rows: Iterable[tuple[Any, ...]]) -> None:
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == _BATCH:
            insert_rows(model, fields, batch)
            batch = []
    insert_rows(model, fields, batch)


def _what_if(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The execution row's what-if change as stored, checked; None for an execution that is no what-if."""
    change = row.get("what_if")
    if change is None:
        if row.get("what_if_of") is not None:
            raise BundleError(f"the bundle's execution {row.get('id')!r} is a what-if of another but holds no change")
        return None
    if not isinstance(change, dict):
        raise BundleError(f"the bundle's execution {row.get('id')!r} is a what-if whose change is not a JSON object")
    try:
        return parse_change(change).model_dump(mode="json")
    except WhatIfRefused as exc:
        raise BundleError(
            f"the bundle's execution {row.get('id')!r} is a what-if whose change is not valid: {exc.message}"
        ) from None


def _check(contents: BundleContents, team: Team) -> None:
    """Refuse, before writing anything, what the import cannot take."""
    rows = contents.rows
    if contents.manifest.get("mode") not in BundleMode.values:
        raise BundleError("the bundle's manifest names no known mode (redacted or full)")
    if any(row.get("codec_version", 0) > CODEC_VERSION for row in rows["journal"]):
        raise BundleError(
            f"the bundle's journal was written by a newer codec than this Host reads (version {CODEC_VERSION})"
        )
    if any(row.get("status") in ACTIVE_EXECUTION_STATUSES for row in rows["executions"]):
        raise BundleError("the bundle holds an execution still under way; only ended executions are imported")
    for row in rows["executions"]:
        _what_if(row)
    thread_ids = [row.get("thread_id") for row in rows["threads"]]
    if taken := sorted(Thread.objects.filter(team=team, thread_id__in=thread_ids).values_list("thread_id", flat=True)):
        raise BundleError(
            f"the thread id {taken[0]} is already used in team {team}; the bundle was imported before, or collides "
            "with a thread of this Host"
        )
    run_ids = [row.get("run_id") for row in rows["runs"] if row.get("run_id")]
    if taken := sorted(
        str(run_id) for run_id in Run.objects.filter(run_id__in=run_ids).values_list("run_id", flat=True)
    ):
        raise BundleError(f"the run id {taken[0]} is already used on this Host; refusing ids that collide")


def _policy_versions(contents: BundleContents, team: Team, ids: _Ids, host: str) -> None:
    policy = current_policy_version(team).policy
    number = policy.versions.aggregate(last=Max("number"))["last"] or 0
    for row in contents.rows["policy_versions"]:
        number += 1
        ids.add(
            "policy_versions",
            row["id"],
            _insert_one(
                HostPolicyVersion,
                {
                    "policy": policy.pk,
                    "number": number,
                    # A bundle of a Host without a newer field (retention_days) takes its default.
                    **{name: row[name] for name in POLICY_VERSION_FIELDS if name in row},
                    "created_at": _when(row["created_at"]),
                    "comment": f"Imported from {host}: version {row['number']} of its policy "
                    f"{row['policy__name']}. {row['comment']}".strip(),
                },
            ),
        )


def _profiles(contents: BundleContents, team: Team, ids: _Ids) -> None:
    for row in contents.rows["profiles"]:
        profile = AgentProfile.objects.filter(team=team, name=row["name"]).first()
        if profile is None:
            name = row["name"]
            if AgentProfile.objects.filter(name=name).exists():
                name = f"{name[:40]}-imported-{AgentProfile.objects.count() + 1}"
            profile = AgentProfile.objects.create(
                name=name,
                team=team,
                model=row["model"],
                base_url=row["base_url"],
                instructions=row["instructions"],
                enabled_tools=row["enabled_tools"],
            )
        ids.add("profiles", row["id"], profile.pk)


def _write(contents: BundleContents, team: Team, transfer: BundleTransfer) -> _Ids:
    rows, ids, host = contents.rows, _Ids(), transfer.host
    _policy_versions(contents, team, ids, host)
    _profiles(contents, team, ids)
    for row in rows["threads"]:
        pk = _insert_one(
            Thread,
            {
                "thread_id": row["thread_id"],
                "title": row["title"],
                "profile": ids.of("profiles", row["profile"]),
                "team": team.pk,
                "imported_by": transfer.pk,
                "created_at": _when(row["created_at"]),
                "updated_at": _when(row["updated_at"]),
            },
        )
        ids.add("threads", row["id"], pk)
    for row in rows["executions"]:
        ids.add(
            "executions",
            row["id"],
            _insert_one(
                Execution,
                {
                    "thread": ids.of("threads", row["thread"]),
                    "number": row["number"],
                    "input": row["input"],
                    "shown_input": row["shown_input"],
                    "status": row["status"],
                    "trigger": row["trigger"],
                    "policy_version": ids.of("policy_versions", row["policy_version"]),
                    "created_at": _when(row["created_at"]),
                    "finished_at": _when(row["finished_at"]),
                    "failure_code": row["failure_code"],
                    "failure_message": row["failure_message"],
                    "cancel_requested": row["cancel_requested"],
                    "cancelled_at": _when(row["cancelled_at"]),
                    "what_if": _what_if(row),
                },
            ),
        )
    for row in rows["executions"]:
        if row.get("what_if_of") is not None:
            Execution.objects.filter(pk=ids.of("executions", row["id"])).update(
                what_if_of=ids.of("executions", row["what_if_of"])
            )
    for row in rows["runs"]:
        ids.add(
            "runs",
            row["id"],
            _insert_one(
                Run,
                {
                    "execution": ids.of("executions", row["execution"]),
                    "run_id": row["run_id"],
                    "number": row["number"],
                    "reason": row["reason"],
                    "previous_run": ids.optional("runs", row["previous_run"]),
                    "status": row["status"],
                    "attempt": row["attempt"],
                    "tool_recovery": row["tool_recovery"],
                    "policy_version": ids.of("policy_versions", row["policy_version"]),
                    "profile_snapshot": row["profile_snapshot"],
                    "started_at": _when(row["started_at"]),
                    "finished_at": _when(row["finished_at"]),
                    "failure_code": row["failure_code"],
                    "failure_message": row["failure_message"],
                    "output": row["output"],
                    "usage": row["usage"],
                    "deferred_resume": row["deferred_resume"],
                    "created_at": _when(row["created_at"]),
                },
            ),
        )
    _journal(rows["journal"], ids)
    _checkpoints(rows["checkpoints"], ids)
    for row in rows["runs"]:
        if row["start_checkpoint"] is not None:
            Run.objects.filter(pk=ids.of("runs", row["id"])).update(
                start_checkpoint=ids.of("checkpoints", row["start_checkpoint"])
            )
    for row in rows["threads"]:
        Thread.objects.filter(pk=ids.of("threads", row["id"])).update(
            selected_checkpoint=ids.optional("checkpoints", row["selected_checkpoint"]),
            # A fork of a thread outside the bundle keeps no link: its source is not here.
            forked_from=ids.optional("checkpoints", row["forked_from"])
            if ids.holds("checkpoints", row["forked_from"])
            else None,
        )
    _timeline(rows["timeline"], ids)
    _decisions(rows, ids, transfer.pk)
    return ids


def _journal(rows: Sequence[dict[str, Any]], ids: _Ids) -> None:
    new_entries: list[tuple[Any, ...]] = []
    for start in range(0, len(rows), _BATCH):
        new_entries += insert_rows(
            JournalEntry,
            ("run", "index", "source_run_id", "source_sequence", "kind", "occurred_at", "payload", "codec_version"),
            [
                (
                    ids.of("runs", row["run"]),
                    row["index"],
                    row["source_run_id"],
                    row["source_sequence"],
                    row["kind"],
                    _when(row["occurred_at"]),
                    row["payload"],
                    row["codec_version"],
                )
                for row in rows[start : start + _BATCH]
            ],
            returning=("id", "run", "index"),
        )
    for pk, run, index in new_entries:
        ids.add("journal", _journal_key(run, index), pk)


def _journal_key(run: int, index: int) -> int:
    # One integer per (run, index), so the journal shares the id map; indexes of one run stay below 2**32.
    return run << 32 | index


def _checkpoints(rows: Sequence[dict[str, Any]], ids: _Ids) -> None:
    digests: dict[int, str] = {}
    for row in rows:
        parent = ids.optional("checkpoints", row["parent"])
        digest = digest_of(
            "" if parent is None else digests[parent],
            row["state_json"],
            row["history_delta"],
            row["pending_deferred_input"],
        )
        pk = _insert_one(
            Checkpoint,
            {
                "thread": ids.of("threads", row["thread"]),
                "run": ids.optional("runs", row["run"]),
                "kind": row["kind"],
                "journal_index": row["journal_index"],
                "state_json": row["state_json"],
                "parent": parent,
                "base": ids.optional("checkpoints", row["base"]),
                "history_delta": row["history_delta"],
                "digest": digest,
                "pending_deferred_input": row["pending_deferred_input"],
                "metadata": row["metadata"],
                "created_at": _when(row["created_at"]),
            },
        )
        digests[pk] = digest
        ids.add("checkpoints", row["id"], pk)


def _timeline(rows: Sequence[dict[str, Any]], ids: _Ids) -> None:
    def mapped(row: dict[str, Any]) -> tuple[Any, ...]:
        run = ids.of("runs", row["run"])
        index = row["journal_entry__index"]
        return (
            ids.of("executions", row["execution"]),
            row["position"],
            run,
            None if index is None else ids.of("journal", _journal_key(run, index)),
            row["subagent_run_id"],
            row["origin"],
            row["event_type"],
            row["event"],
            _when(row["occurred_at"]),
        )

    fields = ("execution", "position", "run", "journal_entry", "subagent_run_id", "origin", "event_type", "event")
    _insert_many(TimelineEvent, (*fields, "occurred_at"), (mapped(row) for row in rows))


def _decisions(rows: Mapping[str, list[dict[str, Any]]], ids: _Ids, transfer_pk: int) -> None:
    for row in rows["deferred_requests"]:
        ids.add(
            "deferred_requests",
            row["id"],
            _insert_one(
                DeferredRequest,
                {
                    "execution": ids.of("executions", row["execution"]),
                    "run": ids.of("runs", row["run"]),
                    "checkpoint": ids.of("checkpoints", row["checkpoint"]),
                    "tool_call_id": row["tool_call_id"],
                    "tool_name": row["tool_name"],
                    "kind": row["kind"],
                    "args": row["args"],
                    "reason": row["reason"],
                    "status": row["status"],
                    "created_at": _when(row["created_at"]),
                    "expires_at": _when(row["expires_at"]),
                },
            ),
        )
    for row in rows["executions"]:
        if row["parent_request"] is not None:
            Execution.objects.filter(pk=ids.of("executions", row["id"])).update(
                parent_request=ids.of("deferred_requests", row["parent_request"])
            )
    for row in rows["submissions"]:
        ids.add(
            "submissions",
            row["id"],
            _insert_one(
                DecisionSubmission,
                {
                    # A set's key makes one Host's form posts count once; another Host's keys mean nothing here
                    # (the Host's own answers to children are keyed by request pk, which the copy renumbered).
                    "key": f"imported-{transfer_pk}-{row['id']}",
                    "execution": ids.of("executions", row["execution"]),
                    "checkpoint": ids.of("checkpoints", row["checkpoint"]),
                    "submitted_at": _when(row["submitted_at"]),
                    "resume_run": ids.optional("runs", row["resume_run"]),
                },
            ),
        )
    for row in rows["decisions"]:
        _insert_one(
            Decision,
            {
                "request": ids.of("deferred_requests", row["request"]),
                "submission": ids.of("submissions", row["submission"]),
                "verdict": row["verdict"],
                "override_args": row["override_args"],
                "approved_args": row["approved_args"],
                "args_digest": row["args_digest"],
                "result": row["result"],
                "message": row["message"],
                "decided_at": _when(row["decided_at"]),
            },
        )
    for row in rows["tool_dispatches"]:
        _insert_one(
            ToolDispatch,
            {
                "run": ids.of("runs", row["run"]),
                "tool_call_id": row["tool_call_id"],
                "tool_name": row["tool_name"],
                "recovery_retryable": row["recovery_retryable"],
                "args": row["args"],
                "dispatched_at": _when(row["dispatched_at"]),
            },
        )


def import_bundle(source: IO[bytes], *, team: Team, user: Any = None, accept_unsigned: bool = False) -> BundleTransfer:
    """Import the bundle in `source` into `team` as a read-only copy; `BundleError` says why it was refused.

    Nothing is written unless everything is: the checks come first, and the rows go in one transaction."""
    contents = read_bundle(source, accept_unsigned=accept_unsigned)
    manifest = contents.manifest
    try:
        with transaction.atomic():
            _check(contents, team)
            transfer = BundleTransfer.objects.create(
                direction=BundleDirection.IMPORT,
                mode=manifest["mode"],
                host=str(manifest.get("host") or "an unnamed Host")[:200],
                exported_at=_moment(manifest["exported_at"]),
                team=team,
                manifest_sha256=contents.manifest_sha256,
                signed=contents.signed,
                user=user if getattr(user, "is_authenticated", False) else None,
            )
            ids = _write(contents, team, transfer)
            transfer.execution_id = ids.of("executions", (manifest.get("root") or {}).get("execution"))
            transfer.save(update_fields=["execution"])
    except IntegrityError as exc:
        raise BundleError(f"the bundle's rows collide with this Host's or break its rules: {exc}") from exc
    except (KeyError, TypeError, ValueError, DatabaseError) as exc:
        if isinstance(exc, BundleError):
            raise
        raise BundleError(f"the bundle holds a malformed row: {exc!r}") from exc
    return transfer
