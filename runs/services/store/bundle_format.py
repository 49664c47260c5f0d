"""The run bundle file: a zip of JSON-lines members and a manifest that holds their hashes, signed by the Host.

A bundle is written whole in memory-bounded steps and read back only through `read_bundle`, which refuses before
anything is used: a file over `HARNESS_BUNDLE_MAX_BYTES`, a zip that does not open (truncated), a member that is not
one of `MEMBERS` (a path such as `../x` is never opened, let alone written), a member that decompresses past its
share of `HARNESS_BUNDLE_MAX_UNPACKED_BYTES` (a zip bomb: counted while reading, whatever the header says), a
member whose SHA-256 differs from the manifest's, a manifest of a newer format, and a signature that does not
match this Host's `HARNESS_BUNDLE_KEY` (unless the caller accepts unsigned bundles).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.utils.crypto import salted_hmac

__all__ = (
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "MEMBERS",
    "SIGNATURE",
    "BundleContents",
    "BundleError",
    "read_bundle",
    "write_bundle",
)

FORMAT = "harness-run-bundle"
# Raised only for a change an older reader would misread: a field a newer Host adds is one an older Host leaves out
# (and imports without), and a newer Host reads an older bundle's rows without it (what-ifs came so).
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
# Every table a bundle may carry, one JSON object per line, in the order an import writes them.
MEMBERS = (
    "policy_versions",
    "profiles",
    "threads",
    "executions",
    "runs",
    "journal",
    "checkpoints",
    "timeline",
    "deferred_requests",
    "submissions",
    "decisions",
    "tool_dispatches",
)
_SALT = "runs.bundle.v1"
_CHUNK = 1 << 20


class BundleError(ValueError):
    """A bundle that is refused; the message says why, for the person who tried to import it."""


@dataclass(frozen=True)
class BundleContents:
    """A bundle that passed every check: its manifest, whether its signature matched, and its rows by member."""

    manifest: dict[str, Any]
    manifest_bytes: bytes
    signed: bool
    rows: Mapping[str, list[dict[str, Any]]]

    @property
    def manifest_sha256(self) -> str:
        return hashlib.sha256(self.manifest_bytes).hexdigest()


def _signature(manifest: bytes) -> str:
    return salted_hmac(_SALT, manifest, secret=settings.HARNESS_BUNDLE_KEY, algorithm="sha256").hexdigest()


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> Iterable[bytes]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode() + b"\n"


def write_bundle(
    target: IO[bytes], header: Mapping[str, Any], members: Mapping[str, Iterable[Mapping[str, Any]]]
) -> str:
    """Write a bundle of `members` (name -> rows) to `target`; the manifest is `header` plus each member's hash.
    Returns the manifest's SHA-256.

    Rows are streamed into the zip one line at a time, so a large execution is never held whole in memory."""
    listed: dict[str, dict[str, int | str]] = {}
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for name in MEMBERS:
            digest, size, count = hashlib.sha256(), 0, 0
            with bundle.open(f"{name}.jsonl", "w", force_zip64=True) as member:
                # Lines go to the zip a megabyte at a time: one compressor call per line cost more than the JSON.
                pending = bytearray()
                for line in _jsonl(members.get(name, ())):
                    pending += line
                    count += 1
                    if len(pending) >= _CHUNK:
                        member.write(pending)
                        digest.update(pending)
                        size += len(pending)
                        pending.clear()
                member.write(pending)
                digest.update(pending)
                size += len(pending)
            listed[name] = {"sha256": digest.hexdigest(), "bytes": size, "rows": count}
        manifest = {**header, "format": FORMAT, "format_version": FORMAT_VERSION, "members": listed}
        manifest_bytes = json.dumps(manifest, sort_keys=True, indent=1).encode()
        bundle.writestr(MANIFEST, manifest_bytes)
        bundle.writestr(SIGNATURE, _signature(manifest_bytes))
    return hashlib.sha256(manifest_bytes).hexdigest()


def _read_member(bundle: zipfile.ZipFile, name: str, limit: int) -> bytes:
    """The member's bytes, refused as soon as more than `limit` came out (the header's sizes may lie)."""
    out = io.BytesIO()
    with bundle.open(name) as member:
        while chunk := member.read(_CHUNK):
            out.write(chunk)
            if out.tell() > limit:
                raise BundleError(
                    f"the bundle's member {name} unpacks to more than {limit} bytes; refusing it (a zip bomb, or "
                    "raise HARNESS_BUNDLE_MAX_UNPACKED_BYTES)"
                )
    return out.getvalue()


def _manifest(bundle: zipfile.ZipFile, names: set[str]) -> tuple[dict[str, Any], bytes]:
    if MANIFEST not in names:
        raise BundleError("the file is not a run bundle: it has no manifest.json")
    manifest_bytes = _read_member(bundle, MANIFEST, _CHUNK)
    try:
        manifest = json.loads(manifest_bytes)
    except ValueError as exc:
        raise BundleError(f"the bundle's manifest is not JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError("the file is not a run bundle: its manifest does not name the format")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise BundleError("the bundle's manifest has no valid format version")
    if version > FORMAT_VERSION:
        raise BundleError(
            f"the bundle has format version {version}, newer than this Host reads ({FORMAT_VERSION}); upgrade this "
            "Host to import it"
        )
    if not isinstance(manifest.get("members"), dict) or set(manifest["members"]) != set(MEMBERS):
        raise BundleError("the bundle's manifest does not list exactly the members of a run bundle")
    return manifest, manifest_bytes


def _checked_signature(bundle: zipfile.ZipFile, names: set[str], manifest_bytes: bytes, accept_unsigned: bool) -> bool:
    signature = _read_member(bundle, SIGNATURE, 1024).decode(errors="replace") if SIGNATURE in names else ""
    if hmac.compare_digest(signature.strip(), _signature(manifest_bytes)):
        return True
    if accept_unsigned:
        return False
    raise BundleError(
        "the bundle's signature does not match this Host's key (HARNESS_BUNDLE_KEY): it was altered, or exported by "
        "a Host with another key; import it as unsigned only if you trust where it came from"
    )


def _rows(name: str, data: bytes) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise BundleError(f"line {number} of the bundle's {name} is not JSON: {exc}") from exc
        if not isinstance(row, dict):
            raise BundleError(f"line {number} of the bundle's {name} is not an object")
        rows.append(row)
    return rows


def read_bundle(source: IO[bytes], *, accept_unsigned: bool = False) -> BundleContents:
    """The checked contents of the bundle in `source` (a seekable binary file); `BundleError` says what is wrong."""
    size = source.seek(0, io.SEEK_END)
    source.seek(0)
    if size > settings.HARNESS_BUNDLE_MAX_BYTES:
        raise BundleError(
            f"the bundle is {size} bytes, over the limit of {settings.HARNESS_BUNDLE_MAX_BYTES} "
            "(HARNESS_BUNDLE_MAX_BYTES)"
        )
    try:
        with zipfile.ZipFile(source) as bundle:
            infos = bundle.infolist()
            names = {info.filename for info in infos}
            allowed = {MANIFEST, SIGNATURE, *(f"{name}.jsonl" for name in MEMBERS)}
            if len(names) != len(infos):
                raise BundleError("the bundle holds a member twice")
            if strange := sorted(names - allowed):
                raise BundleError(f"the bundle holds a member that no run bundle has: {strange[0]!r}")
            manifest, manifest_bytes = _manifest(bundle, names)
            signed = _checked_signature(bundle, names, manifest_bytes, accept_unsigned)
            budget = settings.HARNESS_BUNDLE_MAX_UNPACKED_BYTES
            rows = {}
            for name in MEMBERS:
                if f"{name}.jsonl" not in names:
                    raise BundleError(f"the bundle has no {name}.jsonl; it is incomplete")
                data = _read_member(bundle, f"{name}.jsonl", budget)
                budget -= len(data)
                if hashlib.sha256(data).hexdigest() != manifest["members"][name].get("sha256"):
                    raise BundleError(f"the bundle's {name}.jsonl does not match its hash in the manifest")
                rows[name] = _rows(name, data)
    except zipfile.BadZipFile as exc:
        raise BundleError(f"the file is not a complete zip file (truncated or damaged): {exc}") from exc
    except (EOFError, zipfile.LargeZipFile, NotImplementedError) as exc:
        raise BundleError(f"the bundle cannot be read: {exc}") from exc
    return BundleContents(manifest, manifest_bytes, signed, rows)
