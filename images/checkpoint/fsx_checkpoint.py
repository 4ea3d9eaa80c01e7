#!/usr/bin/env python3
"""fsx-checkpoint: commit a checkpoint once S3 holds it, and find the newest committed one.

The protocol (README, "A checkpoint is durable once committed"):

1. write the checkpoint into its own new directory under ``$CHECKPOINT_DIR``
   (``step-000100``) and close every file. No temporary name and rename: S3 has no rename, so
   the export would write every file twice and leave the old keys behind;
2. ``fsx-checkpoint commit $CHECKPOINT_DIR/step-000100`` waits until every file there has been
   exported to S3 as it is now (an object at the file's key, of its size, whose
   ``file-mtime``, the POSIX metadata FSx writes on export, is the file's modification time),
   then writes ``COMMITTED`` into it, a manifest of the files;
3. on start, ``fsx-checkpoint latest $CHECKPOINT_DIR`` prints the newest directory whose
   ``COMMITTED`` manifest still matches its files, and the job resumes from it; nothing
   printed (exit 1) means a fresh start. A checkpoint with a released file (a stub whose
   data only S3 holds) counts only while S3 still has that file's object (a HEAD of it);
   otherwise ``latest`` says on stderr which files are gone and takes an older one;
4. after a commit, ``fsx-checkpoint prune $CHECKPOINT_DIR --keep N`` deletes the older
   committed directories from the file system (S3 keeps them: deletes are not exported).

Export from the file system to S3 is asynchronous with no stated bound, and the file system
lives in one zone: a checkpoint is durable only once S3 has every file of it. The S3 side of
``$CHECKPOINT_DIR`` is ``$CHECKPOINT_S3_URI``, both set by the platform's runtimes; the job's
identity (its team's Pod Identity role) may read there.

Needs Python 3.9+ and botocore.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

MARKER = "COMMITTED"
MTIME_METADATA = "file-mtime"
"""User metadata (``x-amz-meta-file-mtime``) in which FSx for Lustre stores an exported file's
modification time, in nanoseconds with an ``ns`` suffix (FSx for Lustre User Guide, "POSIX
metadata support for data repositories"). S3's own LastModified says when an upload began,
not which version of the file it carries."""


@dataclass(frozen=True)
class StoredObject:
    """What S3 holds for one file: the object's size and the file mtime it was exported at."""

    size: int
    mtime_ns: int | None


def parse_mtime(value: str | None) -> int | None:
    """FSx's ``file-mtime`` in nanoseconds, or None for a missing or foreign value.

    ``<n>ns`` is nanoseconds, a bare number milliseconds (FSx for Lustre User Guide, "POSIX
    metadata support for data repositories").
    """
    if not value:
        return None
    if value.endswith("ns"):
        digits = value[: -len("ns")]
        return int(digits) if digits.isdigit() else None
    try:
        milliseconds = Decimal(value)
    except ArithmeticError:
        return None
    return int(milliseconds * 1_000_000) if milliseconds.is_finite() else None


Lister = Callable[[str, str], Iterable[tuple[str, StoredObject]]]
"""(bucket, prefix) -> every (key, object) under the prefix."""


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix/``)."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri}")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri}")
    return bucket, (prefix.rstrip("/") + "/") if prefix else ""


def local_files(directory: Path) -> dict[str, os.stat_result]:
    """Every regular file under ``directory`` but the marker, by path relative to it."""
    found: dict[str, os.stat_result] = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            relative = path.relative_to(directory).as_posix()
            if relative != MARKER and path.is_file() and not path.is_symlink():
                found[relative] = path.stat()
    return found


def pending_files(
    directory: Path, bucket: str, prefix: str, lister: Lister
) -> tuple[dict[str, os.stat_result], list[str]]:
    """The directory's files, and those S3 does not hold yet as they are now.

    A file counts as exported when its object has its size and the modification time it has
    now, and it did not change while S3 was asked (stat again after listing).
    """
    files = local_files(directory)
    stored = dict(lister(bucket, prefix))
    after = local_files(directory)
    pending = []
    for relative, status in sorted(files.items()):
        stored_object = stored.get(prefix + relative)
        again = after.get(relative)
        if (
            stored_object is None
            or again is None
            or (again.st_size, again.st_mtime_ns) != (status.st_size, status.st_mtime_ns)
            or stored_object.size != status.st_size
            or stored_object.mtime_ns != status.st_mtime_ns
        ):
            pending.append(relative)
    return files, pending


def s3_prefix_of(directory: Path, checkpoint_dir: Path, checkpoint_s3_uri: str) -> tuple[str, str]:
    """The bucket and key prefix that hold ``directory``, a directory under CHECKPOINT_DIR."""
    bucket, root = split_s3_uri(checkpoint_s3_uri)
    relative = directory.resolve().relative_to(checkpoint_dir.resolve()).as_posix()
    return bucket, root if relative == "." else f"{root}{relative}/"


def commit(
    directory: Path,
    *,
    bucket: str,
    prefix: str,
    lister: Lister,
    timeout_seconds: float,
    poll_seconds: float = 15.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Wait until S3 holds every file of ``directory``, then write its ``COMMITTED`` manifest.

    Returns the files still pending when ``timeout_seconds`` ran out (nothing is committed
    then), or an empty list once committed. The manifest is written to a temporary name and
    renamed, so a reader never sees half of one.
    """
    deadline = clock() + timeout_seconds
    while True:
        files, pending = pending_files(directory, bucket, prefix, lister)
        if not files:
            return ["(no files)"]
        if not pending:
            break
        if clock() >= deadline:
            return pending
        sleep(poll_seconds)
    manifest = {
        # timezone.utc, not datetime.UTC (3.11): the images' Python may be older
        "committed_at": datetime.now(timezone.utc).isoformat(),  # noqa: UP017
        "s3": f"s3://{bucket}/{prefix}",
        # Size and modification time: a file rewritten in place later (a job that resumed
        # from an older step and writes this step again) no longer matches, even at its size.
        "files": {
            name: {"size": status.st_size, "mtime_ns": status.st_mtime_ns}
            for name, status in sorted(files.items())
        },
    }
    partial = directory / f".{MARKER}.partial"
    partial.write_text(json.dumps(manifest, indent=1) + "\n")
    partial.replace(directory / MARKER)
    return []


Head = Callable[[str, str], "StoredObject | None"]
"""(bucket, key) -> the object S3 holds at the key (a HEAD), or None where it holds none."""


STAT_BLOCK_BYTES = 512
"""The unit of ``st_blocks`` (POSIX leaves it open; Linux and Lustre count 512-byte blocks)."""


def released(status: os.stat_result) -> bool:
    """Whether a file may be a released stub: its size, but (almost) no data blocks.

    A release (FSx's RELEASE_DATA_FROM_FILESYSTEM task, Lustre HSM ``released``) keeps the
    file's metadata and frees its data; the next read restores it from its S3 object. Lustre's
    MDT reports a released file of size > 0 as ONE block, not none, so that tar does not take
    it for fully sparse (lustre-release lustre/mdt/mdt_handler.c ``mdt_pack_attr2body``:
    "return 1 block for released file, unless tools like tar will consider it fully sparse
    (LU-3864)"). So a file counts as possibly released when it has at most that one block or
    fewer allocated bytes than its size. A sparse file that is not released also matches and
    costs one HEAD (no subprocess per file, as ``lfs hsm_state`` would); a fully allocated file
    never matches, so S3 is not asked about it.

    Args:
        status: the file's ``stat`` (``st_size`` in bytes, ``st_blocks`` in 512-byte blocks;
            a platform without ``st_blocks`` counts as fully allocated).
    """
    if status.st_size <= 0:
        return False
    blocks = getattr(status, "st_blocks", None)
    if blocks is None:
        return False
    return blocks <= 1 or blocks * STAT_BLOCK_BYTES < status.st_size


def unrestorable(directory: Path, manifest: dict[str, Any], head: Head) -> list[str]:
    """Released files of a committed directory whose S3 object is gone (or another size).

    Their stubs still show the right size and mtime, but no read can ever restore them: S3
    expired or lost the only copy of the data.
    """
    try:
        bucket, prefix = split_s3_uri(str(manifest.get("s3", "")))
    except ValueError:
        return sorted(manifest.get("files", {}))  # no S3 side recorded: nothing to restore from
    gone = []
    for name in sorted(manifest.get("files", {})):
        status = (directory / name).stat()
        if released(status):
            stored = head(bucket, prefix + name)
            if stored is None or stored.size != status.st_size:
                gone.append(name)
    return gone


def committed(directory: Path, head: Head | None = None) -> dict[str, Any] | None:
    """The manifest of a committed directory whose files are all there at their sizes.

    With ``head``, also None where a released file's S3 object is gone
    (:func:`unrestorable`); without it the S3 side is not asked.
    """
    try:
        manifest: dict[str, Any] = json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return None
    for name, recorded in manifest.get("files", {}).items():
        path = directory / name
        if not path.is_file():
            return None
        status = path.stat()
        # Manifests of earlier versions of this tool recorded the size alone.
        size, mtime_ns = (recorded, None) if isinstance(recorded, int) else (
            recorded.get("size"), recorded.get("mtime_ns"))  # fmt: skip
        if status.st_size != size or (mtime_ns is not None and status.st_mtime_ns != mtime_ns):
            return None
    if head is not None and unrestorable(directory, manifest, head):
        return None
    return manifest


def _step_order(name: str) -> tuple[object, ...]:
    """A directory name in natural order (``step-900`` before ``step-1000``)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _committed_newest_first(root: Path) -> list[Path]:
    """The committed directories directly under ``root``, the latest step first.

    By name (``step-000100``, the protocol's naming), not by commit time: commits run in the
    background and may finish out of order (a slow shard's export).
    """
    found = [c for c in (root.iterdir() if root.is_dir() else []) if c.is_dir()]
    return sorted((c for c in found if committed(c) is not None),
                  key=lambda c: _step_order(c.name), reverse=True)  # fmt: skip


def latest(
    root: Path, head: Head | None = None, report: Callable[[str], None] | None = None
) -> Path | None:
    """The committed directory of the latest step directly under ``root``, or None.

    With ``head``, a checkpoint with a released file whose S3 object is gone is passed over
    (it could never be read back) and ``report`` is told which files, before an older one
    is chosen.
    """
    for directory in _committed_newest_first(root):
        if head is None:
            return directory
        manifest = committed(directory)
        gone = unrestorable(directory, manifest, head) if manifest is not None else []
        if not gone:
            return directory
        if report is not None:
            shown = ", ".join(gone[:5]) + (" ..." if len(gone) > 5 else "")
            report(
                f"fsx-checkpoint: skipping {directory}: released from the file system and S3 "
                f"no longer holds {shown}; it can never be restored"
            )
    return None


def prune(root: Path, keep: int) -> list[Path]:
    """Delete from the file system all but the ``keep`` newest committed directories.

    Release frees only files unread for ``releaseAfterDays``, and a checkpoint nobody reads
    keeps its write time as its access time, so a job that checkpoints often fills the file
    system unless it deletes old ones. Deletes are not exported (README, "Capacity"): S3 keeps
    every checkpoint. Directories not committed are never touched (one may be in progress or
    waiting for export). Returns what was deleted.
    """
    if keep < 1:
        raise ValueError("keep at least the newest committed checkpoint")
    doomed = _committed_newest_first(root)[keep:]
    for directory in doomed:
        shutil.rmtree(directory)
    return doomed


def botocore_lister(client: Any = None) -> Lister:
    """List with botocore's S3 client (default: one with the pod's identity's credentials)."""
    if client is None:
        # Imported here so that `latest` runs on an image without botocore.
        import botocore.session  # noqa: PLC0415

        client = botocore.session.get_session().create_client("s3")

    def list_objects(bucket: str, prefix: str) -> Iterator[tuple[str, StoredObject]]:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                # Listing carries no user metadata: ask for each object's.
                head = client.head_object(Bucket=bucket, Key=item["Key"])
                mtime = parse_mtime(head.get("Metadata", {}).get(MTIME_METADATA))
                yield item["Key"], StoredObject(head["ContentLength"], mtime)

    return list_objects


def botocore_head(client: Any = None) -> Head:
    """HEAD with botocore's S3 client (default: one with the pod's identity's credentials)."""
    if client is None:
        import botocore.session  # noqa: PLC0415

        client = botocore.session.get_session().create_client("s3")

    def head(bucket: str, key: str) -> StoredObject | None:
        try:
            found = client.head_object(Bucket=bucket, Key=key)
        except client.exceptions.ClientError as error:
            if str(error.response.get("Error", {}).get("Code")) in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise
        mtime = parse_mtime(found.get("Metadata", {}).get(MTIME_METADATA))
        return StoredObject(found["ContentLength"], mtime)

    return head


def lazy_head() -> Head:
    """:func:`botocore_head`, made on its first use: ``latest`` needs S3 only for released files."""
    made: list[Head] = []

    def head(bucket: str, key: str) -> StoredObject | None:
        if not made:
            made.append(botocore_head())
        return made[0](bucket, key)

    return head


def main(
    argv: list[str] | None = None, lister: Lister | None = None, head: Head | None = None
) -> int:
    """The command line: ``commit DIR``, ``latest ROOT`` or ``prune ROOT --keep N``."""
    parser = argparse.ArgumentParser(prog="fsx-checkpoint", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commit_command = commands.add_parser("commit", help="mark DIR committed once S3 holds it")
    commit_command.add_argument("directory", type=Path)
    commit_command.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds to wait for export (3600)"
    )
    commit_command.add_argument("--poll", type=float, default=15.0, help="seconds between looks")
    latest_command = commands.add_parser("latest", help="print the newest committed directory")
    latest_command.add_argument("root", type=Path)
    prune_command = commands.add_parser(
        "prune", help="delete all but the newest committed directories from the file system"
    )
    prune_command.add_argument("root", type=Path)
    prune_command.add_argument("--keep", type=int, required=True, help="how many to keep (>= 1)")
    args = parser.parse_args(argv)
    if args.command == "prune":
        if args.keep < 1:
            print("fsx-checkpoint: --keep must be at least 1", file=sys.stderr)
            return 2
        for directory in prune(args.root, args.keep):
            print(f"deleted {directory} (S3 keeps it)")
        return 0
    if args.command == "latest":
        found = latest(
            args.root,
            head=head or lazy_head(),
            report=lambda message: print(message, file=sys.stderr),
        )
        if found is None:
            return 1
        print(found)
        return 0
    checkpoint_dir = os.environ.get("CHECKPOINT_DIR")
    checkpoint_s3_uri = os.environ.get("CHECKPOINT_S3_URI")
    if not checkpoint_dir or not checkpoint_s3_uri:
        print("fsx-checkpoint: CHECKPOINT_DIR and CHECKPOINT_S3_URI must be set", file=sys.stderr)
        return 2
    try:
        bucket, prefix = s3_prefix_of(args.directory, Path(checkpoint_dir), checkpoint_s3_uri)
    except ValueError as error:
        print(f"fsx-checkpoint: {args.directory} is not under {checkpoint_dir}: {error}",
              file=sys.stderr)  # fmt: skip
        return 2
    pending = commit(
        args.directory,
        bucket=bucket,
        prefix=prefix,
        lister=lister or botocore_lister(),
        timeout_seconds=args.timeout,
        poll_seconds=args.poll,
    )
    if pending:
        shown = ", ".join(pending[:5]) + (" ..." if len(pending) > 5 else "")
        print(f"fsx-checkpoint: not committed, S3 does not hold yet: {shown}", file=sys.stderr)
        return 1
    print(args.directory / MARKER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
