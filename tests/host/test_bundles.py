"""Run bundles: an ended execution tree (a Host-managed child, an approval, a masked secret) exported, removed and
imported again shows the same pages; every bad bundle is refused with nothing written."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.urls import reverse

from runs.models import (
    DEFAULT_TEAM,
    BundleDirection,
    BundleMode,
    BundleTransfer,
    Checkpoint,
    Decision,
    DeferredRequest,
    Execution,
    HostPolicyVersion,
    JournalEntry,
    Run,
    Team,
    TeamRole,
    Thread,
    TimelineEvent,
)
from runs.services.lifecycle import bundle_export, bundle_import, executions, forks, starts
from runs.services.store import checkpoints
from runs.services.store.bundle_format import BundleError
from tests.support import factories
from tests.support.bundles import SECRET, ended_tree, exported, page_data, remove, rewritten, tree_of

pytestmark = pytest.mark.django_db

TABLES = (Thread, Execution, Run, JournalEntry, Checkpoint, TimelineEvent, DeferredRequest, Decision, HostPolicyVersion)


@pytest.fixture
def approver(django_user_model):
    user = django_user_model.objects.create_user("approver-1")
    user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    return django_user_model.objects.get(pk=user.pk)


@pytest.fixture
def tree(approver) -> Execution:
    return ended_tree(approver)


def default_team() -> Team:
    return Team.objects.get(name=DEFAULT_TEAM)


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in TABLES}


def assert_pages_load(client, user, execution: Execution) -> None:
    """The thread, execution, run and raw event pages of the copy answer (the timeline itself comes over the socket,
    from the frames `page_data` compares)."""
    client.force_login(user)
    urls = [reverse("runs:thread", args=[execution.thread_id]), reverse("runs:execution", args=[execution.pk])]
    urls += [reverse("runs:run", args=[run.pk]) for run in execution.runs.all()]
    urls += [reverse("runs:event", args=[execution.pk, event.position]) for event in execution.timeline.all()[:5]]
    for url in urls:
        assert client.get(url).status_code == 200, url


def imported(bundle: bytes, **kwargs) -> BundleTransfer:
    return bundle_import.import_bundle(io.BytesIO(bundle), team=default_team(), **kwargs)


def test_a_full_bundle_round_trip_shows_the_same_pages_and_can_be_forked(tree, client, approver):
    before = [page_data(execution) for execution in tree_of(tree)]
    assert len(before) == 2, "the parent and its child"
    bundle = exported(tree)
    remove(tree)

    transfer = imported(bundle)

    assert transfer.direction == BundleDirection.IMPORT and transfer.mode == BundleMode.FULL and transfer.signed
    copy = Execution.objects.get(pk=transfer.execution_id)
    assert [page_data(execution) for execution in tree_of(copy)] == before
    for execution in tree_of(copy):
        assert_pages_load(client, approver, execution)
    assert all(thread.imported_by == transfer for thread in bundle_export.tree_threads(copy))
    assert copy.input.endswith(SECRET), "a full bundle keeps the real input"
    # The journal came along, and the checkpoints load with this Host's key: the copy can be forked.
    assert JournalEntry.objects.filter(run__execution=copy).exists()
    fork = forks.fork_thread(copy.thread.selected_checkpoint)
    assert checkpoints.load(fork.selected_checkpoint).message_history


def test_the_imported_copy_is_read_only(tree, client, approver, settings):
    bundle = exported(tree)
    remove(tree)
    copy = Execution.objects.get(pk=imported(bundle).execution_id)

    with pytest.raises(executions.ReadOnlyThread):
        executions.start_execution(copy.thread, "more")
    with pytest.raises(starts.StartRefused, match="read-only copy"):
        starts.new_execution("k-ro", approver, thread=copy.thread, input="more")
    client.force_login(approver)
    page = client.get(reverse("runs:execution", args=[copy.pk])).content.decode()
    assert f"imported from <strong>{settings.HARNESS_HOST_NAME}</strong>" in page
    thread_page = client.get(reverse("runs:thread", args=[copy.thread.pk])).content.decode()
    assert 'id="imported"' in thread_page and "start-execution" not in thread_page
    assert copy.thread.executions.count() == 1


def test_a_redacted_bundle_holds_no_journal_no_state_and_no_secret(tree, client, approver):
    before = [page_data(execution) for execution in tree_of(tree)]
    bundle = exported(tree, BundleMode.REDACTED)
    with zipfile.ZipFile(io.BytesIO(bundle)) as opened:
        text = b"".join(opened.read(name) for name in opened.namelist())
    assert SECRET.encode() not in text
    assert json.loads(zipfile.ZipFile(io.BytesIO(bundle)).read("manifest.json"))["members"]["journal"]["rows"] == 0
    remove(tree)

    copy = Execution.objects.get(pk=imported(bundle).execution_id)

    assert [page_data(execution) for execution in tree_of(copy)] == before
    for execution in tree_of(copy):
        assert_pages_load(client, approver, execution)
    assert not JournalEntry.objects.filter(run__execution=copy).exists()
    assert SECRET not in copy.input
    with pytest.raises(checkpoints.CheckpointError, match="redacted bundle"):
        forks.fork_thread(copy.thread.selected_checkpoint)


def test_a_redacted_export_refuses_an_altered_checkpoint(tree):
    altered = Checkpoint.objects.filter(thread=tree.thread, parent__isnull=False).order_by("pk").first()
    Checkpoint.objects.filter(pk=altered.pk).update(history_delta=altered.history_delta + " ")
    with pytest.raises(checkpoints.CheckpointError, match=f"checkpoint {altered.pk} .* was altered"):
        exported(tree, BundleMode.REDACTED)
    assert not BundleTransfer.objects.exists()


def test_every_export_is_recorded_and_a_full_one_needs_the_permission(tree, django_user_model):
    viewer = factories.member(django_user_model, "viewer-1", default_team(), TeamRole.VIEWER)
    outsider = factories.member(django_user_model, "outsider-1", Team.objects.create(name="other"), TeamRole.ADMIN)

    exported(tree, BundleMode.REDACTED, user=viewer)
    with pytest.raises(bundle_export.ExportRefused, match="export_full_bundle"):
        exported(tree, BundleMode.FULL, user=viewer)
    with pytest.raises(bundle_export.ExportRefused, match="may not see"):
        exported(tree, BundleMode.REDACTED, user=outsider)
    viewer.user_permissions.add(Permission.objects.get(codename="export_full_bundle"))
    viewer = django_user_model.objects.get(pk=viewer.pk)
    exported(tree, BundleMode.FULL, user=viewer)

    records = list(BundleTransfer.objects.order_by("pk").values_list("direction", "mode", "user__username"))
    assert records == [("export", "redacted", "viewer-1"), ("export", "full", "viewer-1")]


def test_an_execution_under_way_is_not_exported():
    suspended = factories.suspended_execution()
    with pytest.raises(bundle_export.ExportRefused, match="under way"):
        exported(suspended.execution)
    assert not BundleTransfer.objects.exists()


def _newer_format(bundle: bytes) -> bytes:
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(bundle)).read("manifest.json"))
    manifest["format_version"] += 1
    return rewritten(bundle, {"manifest.json": json.dumps(manifest).encode()})


def _bomb(bundle: bytes) -> bytes:
    return rewritten(bundle, {"timeline.jsonl": b"\n" * (8 * 1024 * 1024)})


REFUSALS = {
    "a member changed": (
        lambda bundle: rewritten(bundle, {"executions.jsonl": b'{"id": 1}\n'}),
        {"accept_unsigned": True},
        "does not match its hash",
    ),
    "the manifest changed": (
        lambda bundle: rewritten(
            bundle, {"manifest.json": zipfile.ZipFile(io.BytesIO(bundle)).read("manifest.json")[:-1] + b" }"}
        ),
        {},
        "signature does not match",
    ),
    "no signature": (lambda bundle: rewritten(bundle, {"manifest.sig": None}), {}, "signature does not match"),
    "a newer format": (_newer_format, {"accept_unsigned": True}, "newer than this Host reads"),
    "truncated": (lambda bundle: bundle[: len(bundle) // 2], {}, "not a complete zip"),
    "not a zip": (lambda bundle: b"hello", {}, "not a complete zip"),
    "a path out of the bundle": (
        lambda bundle: rewritten(bundle, {"../../escaped.jsonl": b"{}\n"}),
        {"accept_unsigned": True},
        "no run bundle has",
    ),
    "a member missing": (lambda bundle: rewritten(bundle, {"runs.jsonl": None}), {}, "no runs.jsonl"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_bad_bundle_is_refused_with_nothing_written(tree, case, tmp_path, monkeypatch):
    change, options, message = REFUSALS[case]
    bundle = change(exported(tree))
    remove(tree)
    before = counts()
    monkeypatch.chdir(tmp_path)

    with pytest.raises(BundleError, match=message):
        imported(bundle, **options)

    assert counts() == before
    assert not BundleTransfer.objects.filter(direction=BundleDirection.IMPORT).exists()
    assert list(tmp_path.iterdir()) == [] and not (tmp_path.parent.parent / "escaped.jsonl").exists()


def test_a_zip_bomb_and_an_oversized_file_are_refused_before_they_are_read(tree, settings):
    bundle = exported(tree)
    remove(tree)
    before = counts()
    settings.HARNESS_BUNDLE_MAX_UNPACKED_BYTES = 4 * 1024 * 1024
    with pytest.raises(BundleError, match="zip bomb"):
        imported(_bomb(bundle), accept_unsigned=True)
    settings.HARNESS_BUNDLE_MAX_BYTES = len(bundle) - 1
    with pytest.raises(BundleError, match="over the limit"):
        imported(bundle)
    assert counts() == before


def test_an_unsigned_bundle_is_imported_only_when_accepted(tree, settings):
    bundle = exported(tree)
    remove(tree)
    settings.HARNESS_BUNDLE_KEY = "another Host's key"
    with pytest.raises(BundleError, match="signature does not match"):
        imported(bundle)

    transfer = imported(bundle, accept_unsigned=True)

    assert not transfer.signed


def test_ids_that_collide_are_refused_with_nothing_written(tree):
    bundle = exported(tree)
    before = counts()
    with pytest.raises(BundleError, match="already used"):
        imported(bundle)
    assert counts() == before
    remove(tree)
    imported(bundle)
    after = counts()
    with pytest.raises(BundleError, match="already used"):
        imported(bundle)
    assert counts() == after


def test_a_journal_of_a_newer_codec_is_refused(tree):
    bundle = exported(tree)
    remove(tree)
    lines = zipfile.ZipFile(io.BytesIO(bundle)).read("journal.jsonl").splitlines()
    row = json.loads(lines[0])
    row["codec_version"] = 99
    changed = rewritten(bundle, {"journal.jsonl": b"\n".join([json.dumps(row).encode(), *lines[1:]]) + b"\n"})
    with pytest.raises(BundleError, match="does not match its hash"):
        imported(changed, accept_unsigned=True)


def test_the_commands_export_and_import_and_refuse_with_a_clear_error(tree, tmp_path):
    path = tmp_path / "tree.zip"
    call_command("harness_export", str(tree.pk), "--output", str(path), "--mode", "full")
    with pytest.raises(CommandError, match="exists"):
        call_command("harness_export", str(tree.pk), "--output", str(path))
    with pytest.raises(CommandError, match="already used"):
        call_command("harness_import", str(path))
    remove(tree)
    call_command("harness_import", str(path))
    assert BundleTransfer.objects.filter(direction=BundleDirection.IMPORT, user=None).count() == 1
    with pytest.raises(CommandError, match="no team"):
        call_command("harness_import", str(path), "--team", "nope")


def test_the_page_download_and_the_admin_upload(tree, client, django_user_model):
    admin = factories.member(django_user_model, "team-admin", default_team(), TeamRole.ADMIN)
    admin.is_staff = True
    admin.save()
    client.force_login(admin)
    page = client.get(reverse("runs:execution", args=[tree.pk])).content.decode()
    assert 'id="export-bundle"' in page and 'value="full"' not in page

    download = client.post(reverse("runs:export_bundle", args=[tree.pk]), {"mode": "redacted"})
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    bundle = b"".join(download.streaming_content)
    refused = client.post(reverse("runs:export_bundle", args=[tree.pk]), {"mode": "full"})
    assert refused.status_code == 302
    remove(tree)

    upload = reverse("admin:runs_bundletransfer_import")
    bad = client.post(upload, {"bundle": io.BytesIO(b"junk"), "team": default_team().pk})
    assert bad.status_code == 400 and "Nothing was imported" in bad.content.decode()
    assert not Thread.objects.exists()
    good_file = io.BytesIO(bundle)
    good_file.name = "tree.zip"
    good = client.post(upload, {"bundle": good_file, "team": default_team().pk})
    transfer = BundleTransfer.objects.get(direction=BundleDirection.IMPORT)
    assert good.status_code == 302 and good["Location"] == reverse("runs:execution", args=[transfer.execution_id])
    assert transfer.user == admin
