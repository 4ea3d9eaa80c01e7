"""The checkpoint commit protocol's tool (images/checkpoint/fsx_checkpoint.py), on files here.

S3 is the durable copy and export is asynchronous: a checkpoint counts only once S3 holds
every file of it as the file now is, and a job resumes from the newest such checkpoint.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from synth.stackfile import REPOSITORY_ROOT

TOOL = REPOSITORY_ROOT / "images" / "checkpoint" / "fsx_checkpoint.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fsx_checkpoint", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["fsx_checkpoint"] = module
    spec.loader.exec_module(module)
    return module


tool = _load()


class FakeS3:
    """Objects by key, as an export would leave them."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}
        self.listed = 0

    def export(self, key: str, path: Path) -> None:
        """What FSx's export leaves: the file's bytes and its mtime as object metadata."""
        self.objects[key] = tool.StoredObject(path.stat().st_size, path.stat().st_mtime_ns)

    def __call__(self, bucket: str, prefix: str) -> list[tuple[str, Any]]:
        assert bucket == "ckpt-bucket"
        self.listed += 1
        return [(k, v) for k, v in self.objects.items() if k.startswith(prefix)]


def _checkpoint(root: Path, name: str, shards: int = 2, size: int = 100) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    for shard in range(shards):
        (directory / f"shard-{shard}.pt").write_bytes(b"x" * (size + shard))
    return directory


PREFIX = "checkpoints/ml-a/job-1/step-100/"


def test_commit_waits_for_every_shard_then_writes_the_manifest(tmp_path: Path) -> None:
    directory = _checkpoint(tmp_path, "step-100")
    s3 = FakeS3()
    s3.export(PREFIX + "shard-0.pt", directory / "shard-0.pt")
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        s3.export(PREFIX + "shard-1.pt", directory / "shard-1.pt")  # exported meanwhile

    pending = tool.commit(directory, bucket="ckpt-bucket", prefix=PREFIX, lister=s3,
                          timeout_seconds=60, poll_seconds=5, sleep=sleep)  # fmt: skip
    assert pending == [] and waits == [5]
    manifest = json.loads((directory / "COMMITTED").read_text())
    assert {name: f["size"] for name, f in manifest["files"].items()} == {
        "shard-0.pt": 100, "shard-1.pt": 101
    }  # fmt: skip
    assert (
        manifest["files"]["shard-1.pt"]["mtime_ns"] == (directory / "shard-1.pt").stat().st_mtime_ns
    )
    assert manifest["s3"] == f"s3://ckpt-bucket/{PREFIX}"
    assert not (directory / ".COMMITTED.partial").exists()


def test_nothing_is_committed_while_a_shard_is_not_exported(tmp_path: Path) -> None:
    directory = _checkpoint(tmp_path, "step-100")
    s3 = FakeS3()
    s3.export(PREFIX + "shard-0.pt", directory / "shard-0.pt")
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    pending = tool.commit(directory, bucket="ckpt-bucket", prefix=PREFIX, lister=s3,
                          timeout_seconds=30, poll_seconds=10, sleep=sleep,
                          clock=lambda: now[0])  # fmt: skip
    assert pending == ["shard-1.pt"]
    assert not (directory / "COMMITTED").exists()


@pytest.mark.parametrize("case", ["same size, rewritten", "other size", "no metadata"])
def test_an_object_of_an_earlier_write_does_not_count(tmp_path: Path, case: str) -> None:
    """A shard rewritten after its export began: S3 holds the earlier bytes, whatever its
    LastModified says (a multipart upload's is when the upload started)."""
    directory = _checkpoint(tmp_path, "step-100", shards=1)
    s3 = FakeS3()
    path = directory / "shard-0.pt"
    s3.export(PREFIX + "shard-0.pt", path)
    if case == "same size, rewritten":
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000))
    elif case == "other size":
        path.write_bytes(b"y" * 7)
    else:
        s3.objects[PREFIX + "shard-0.pt"] = tool.StoredObject(path.stat().st_size, None)
    _, pending = tool.pending_files(directory, "ckpt-bucket", PREFIX, s3)
    assert pending == ["shard-0.pt"]


def test_a_file_that_changes_while_s3_is_asked_is_pending(tmp_path: Path) -> None:
    directory = _checkpoint(tmp_path, "step-100", shards=1)
    path = directory / "shard-0.pt"
    s3 = FakeS3()
    s3.export(PREFIX + "shard-0.pt", path)

    def listing_while_written(bucket: str, prefix: str) -> list[tuple[str, Any]]:
        listed = s3(bucket, prefix)
        path.write_bytes(b"z" * 100)  # same size, new bytes, while the list was answered
        return listed

    _, pending = tool.pending_files(directory, "ckpt-bucket", PREFIX, listing_while_written)
    assert pending == ["shard-0.pt"]


def test_fsx_mtime_metadata_is_read_as_nanoseconds() -> None:
    assert tool.parse_mtime("1700000000123456789ns") == 1700000000123456789
    # without the suffix FSx reads milliseconds (objects written by others, then imported)
    assert tool.parse_mtime("1700000000123") == 1700000000123000000
    assert tool.parse_mtime(None) is None and tool.parse_mtime("yesterday") is None


def test_latest_is_the_newest_committed_checkpoint_whose_files_are_whole(tmp_path: Path) -> None:
    root = tmp_path / "job-1"
    s3 = FakeS3()
    for step in ("step-100", "step-200", "step-300"):
        directory = _checkpoint(root, step)
        for shard in directory.iterdir():
            s3.export(f"checkpoints/ml-a/job-1/{step}/{shard.name}", shard)
        if step != "step-300":  # the last one was never committed (the node died)
            assert tool.commit(directory, bucket="ckpt-bucket",
                               prefix=f"checkpoints/ml-a/job-1/{step}/", lister=s3,
                               timeout_seconds=0) == []  # fmt: skip
    assert tool.latest(root) == root / "step-200"
    (root / "step-200" / "shard-1.pt").write_bytes(b"truncated")  # damaged since
    assert tool.latest(root) == root / "step-100"
    assert tool.latest(tmp_path / "no-such-job") is None


def test_the_command_maps_the_directory_to_its_s3_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "fsx" / "checkpoints" / "ml-a" / "job-1"
    directory = _checkpoint(job, "step-100")
    s3 = FakeS3()
    for shard in directory.iterdir():
        s3.export(PREFIX + shard.name, shard)
    monkeypatch.setenv("CHECKPOINT_DIR", str(job))
    monkeypatch.setenv("CHECKPOINT_S3_URI", "s3://ckpt-bucket/checkpoints/ml-a/job-1")
    assert tool.main(["commit", str(directory), "--timeout", "0"], lister=s3) == 0
    assert tool.main(["latest", str(job)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == str(directory)
    outside = _checkpoint(tmp_path, "elsewhere")
    assert tool.main(["commit", str(outside), "--timeout", "0"], lister=s3) == 2
    assert "is not under" in capsys.readouterr().err
    monkeypatch.delenv("CHECKPOINT_S3_URI")
    assert tool.main(["commit", str(directory)], lister=s3) == 2


def test_the_botocore_lister_reads_every_page_and_each_objects_mtime() -> None:
    client = botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    written = datetime(2026, 12, 1, tzinfo=UTC)
    with Stubber(client) as stub:
        params = {"Bucket": "ckpt-bucket", "Prefix": PREFIX}
        for index, last in ((0, False), (1, True)):
            key = f"{PREFIX}shard-{index}.pt"
            page = {
                "Contents": [{"Key": key, "Size": 100 + index, "LastModified": written}],
                "IsTruncated": not last,
                **({} if last else {"NextContinuationToken": "t"}),
            }
            stub.add_response(
                "list_objects_v2", page, {**params, **({"ContinuationToken": "t"} if index else {})}
            )
            stub.add_response("head_object", {
                "ContentLength": 100 + index,
                "Metadata": {"file-mtime": f"{1_700_000_000_000_000_000 + index}ns"},
            }, {"Bucket": "ckpt-bucket", "Key": key})  # fmt: skip
        listed = dict(tool.botocore_lister(client)("ckpt-bucket", PREFIX))
        stub.assert_no_pending_responses()
    assert listed == {
        f"{PREFIX}shard-0.pt": tool.StoredObject(100, 1_700_000_000_000_000_000),
        f"{PREFIX}shard-1.pt": tool.StoredObject(101, 1_700_000_000_000_000_001),
    }


def test_the_tool_needs_only_the_standard_library_until_it_lists_s3() -> None:
    """``latest`` (what a job runs first) works on any image's Python, botocore or not."""
    source = TOOL.read_text()
    assert source.startswith("#!/usr/bin/env python3\n")
    assert os.access(TOOL, os.X_OK), "installed as an executable"
    top_level = {
        alias.name.split(".")[0]
        for node in ast.parse(source).body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    assert top_level - {"__future__"} <= set(sys.stdlib_module_names), top_level


def test_prune_keeps_the_newest_committed_and_never_an_uncommitted_one(tmp_path: Path) -> None:
    root = tmp_path / "job-1"
    s3 = FakeS3()
    for step in ("step-100", "step-200", "step-300", "step-400"):
        directory = _checkpoint(root, step)
        if step == "step-400":
            continue  # still being written or waiting for export
        for shard in directory.iterdir():
            s3.export(f"checkpoints/ml-a/job-1/{step}/{shard.name}", shard)
        assert tool.commit(directory, bucket="ckpt-bucket",
                           prefix=f"checkpoints/ml-a/job-1/{step}/", lister=s3,
                           timeout_seconds=0) == []  # fmt: skip
    assert tool.main(["prune", str(root), "--keep", "2"]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["step-200", "step-300", "step-400"]
    assert tool.latest(root) == root / "step-300"
    assert tool.main(["prune", str(root), "--keep", "0"]) == 2  # never the last committed one
    assert tool.prune(root, 5) == []


def _committed_step(root: Path, step: str, s3: Any, size: int = 100) -> Path:
    directory = _checkpoint(root, step, size=size)
    for shard in directory.iterdir():
        s3.export(f"checkpoints/ml-a/job-1/{step}/{shard.name}", shard)
    assert tool.commit(directory, bucket="ckpt-bucket", prefix=f"checkpoints/ml-a/job-1/{step}/",
                       lister=s3, timeout_seconds=0) == []  # fmt: skip
    return directory


def test_latest_is_the_latest_step_whatever_order_the_commits_finished_in(tmp_path: Path) -> None:
    root, s3 = tmp_path / "job-1", FakeS3()
    _committed_step(root, "step-1000", s3)
    _committed_step(root, "step-900", s3)  # its export was slower: committed last
    assert tool.latest(root) == root / "step-1000"


def test_a_committed_step_rewritten_in_place_is_no_longer_committed(tmp_path: Path) -> None:
    root, s3 = tmp_path / "job-1", FakeS3()
    _committed_step(root, "step-100", s3)
    directory = _committed_step(root, "step-200", s3)
    shard = directory / "shard-0.pt"
    stamp = shard.stat().st_mtime_ns
    shard.write_bytes(b"x" * shard.stat().st_size)  # the job writes step-200 again, same size
    os.utime(shard, ns=(stamp + 10**9, stamp + 10**9))
    assert tool.latest(root) == root / "step-100"


class FakeHead:
    """HEAD of single objects in a :class:`FakeS3` (None where it holds none)."""

    def __init__(self, s3: FakeS3) -> None:
        self.s3 = s3
        self.asked: list[str] = []

    def __call__(self, bucket: str, key: str) -> Any:
        assert bucket == "ckpt-bucket"
        self.asked.append(key)
        return self.s3.objects.get(key)


STUB_BYTES = 1 << 20
"""Shards big enough that one written file-system block (4 KiB here) is less than their size."""


def _release(path: Path, blocks: int = 0) -> None:
    """What FSx's release leaves: the file's size and mtime with (almost) no data (a stub).

    ``blocks=0`` leaves no block at all; ``blocks=1`` writes one, what Lustre's MDT reports for a
    released file of size > 0 (lustre-release lustre/mdt/mdt_handler.c ``mdt_pack_attr2body``,
    LU-3864). A local file system counts its own block size (4 KiB: 8 ``st_blocks``) for that
    one block, still far below the stub's size.
    """
    status = path.stat()
    path.unlink()
    with path.open("wb") as stub:
        stub.truncate(status.st_size)
        if blocks:
            stub.seek(0)
            stub.write(b"\0")
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    after = path.stat()
    assert after.st_size == status.st_size and after.st_mtime_ns == status.st_mtime_ns
    if blocks == 0:
        assert after.st_blocks == 0, "this file system keeps no sparse files"
    else:
        assert 0 < after.st_blocks * 512 < after.st_size, "this file system keeps no sparse files"
    assert tool.released(after)


def _stat(size: int, blocks: int) -> os.stat_result:
    """A ``stat`` of a regular file of ``size`` bytes with ``blocks`` 512-byte blocks."""
    return os.stat_result((0o100644, 1, 1, 1, 0, 0, size, 0, 0, 0), {"st_blocks": blocks})


@pytest.mark.parametrize(
    ("size", "blocks", "released"),
    [
        (100, 0, True),  # no block at all
        (100, 1, True),  # what Lustre reports for any released file of size > 0 (LU-3864)
        (STUB_BYTES, 1, True),
        (STUB_BYTES, 8, True),  # sparse: one 4 KiB block written (costs one HEAD)
        (100, 8, False),  # fully allocated: a 4 KiB block holds it
        (STUB_BYTES, STUB_BYTES // 512, False),
        (0, 0, False),  # an empty file has nothing to restore
    ],
)
def test_a_released_file_is_recognised_by_its_allocated_bytes(
    size: int, blocks: int, released: bool
) -> None:
    assert tool.released(_stat(size, blocks)) is released


@pytest.mark.parametrize("blocks", [0, 1], ids=["no-block-stub", "one-block-stub"])
def test_a_released_checkpoint_whose_s3_object_expired_is_not_resumed_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], blocks: int
) -> None:
    root, s3 = tmp_path / "job-1", FakeS3()
    _committed_step(root, "step-100", s3, size=STUB_BYTES)
    newest = _committed_step(root, "step-200", s3, size=STUB_BYTES)
    head = FakeHead(s3)
    for shard in newest.iterdir():
        if shard.name != tool.MARKER:
            _release(shard, blocks)
    # Released, but S3 holds every object: a read restores them; it is still the latest.
    assert tool.latest(root, head=head) == newest
    assert tool.committed(newest, head) is not None
    assert set(head.asked) == {f"checkpoints/ml-a/job-1/step-200/shard-{i}.pt" for i in (0, 1)}
    # S3 expired one object: size and mtime of the stub still match the manifest.
    del s3.objects["checkpoints/ml-a/job-1/step-200/shard-1.pt"]
    assert tool.committed(newest) is not None  # what the file system alone shows
    assert tool.committed(newest, head) is None
    reports: list[str] = []
    assert tool.latest(root, head=head, report=reports.append) == root / "step-100"
    assert reports == [
        f"fsx-checkpoint: skipping {newest}: released from the file system and S3 no longer "
        "holds shard-1.pt; it can never be restored"
    ]
    assert tool.main(["latest", str(root)], head=head) == 0
    out, err = capsys.readouterr()
    assert out == f"{root / 'step-100'}\n"
    assert "skipping" in err and "shard-1.pt" in err and "can never be restored" in err


@pytest.mark.parametrize("size", [100, STUB_BYTES])
def test_latest_asks_s3_only_about_released_files(tmp_path: Path, size: int) -> None:
    root, s3 = tmp_path / "job-1", FakeS3()
    directory = _committed_step(root, "step-100", s3, size=size)
    assert all(not tool.released(shard.stat()) for shard in directory.iterdir())
    head = FakeHead(s3)
    s3.objects.clear()  # S3 lost them all, but the file system holds every byte
    assert tool.latest(root, head=head) == directory and head.asked == []


def test_the_botocore_head_answers_none_for_a_missing_object() -> None:
    client = botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    key = f"{PREFIX}shard-0.pt"
    with Stubber(client) as stub:
        stub.add_response("head_object", {
            "ContentLength": 100, "Metadata": {"file-mtime": "1700000000000000000ns"},
        }, {"Bucket": "ckpt-bucket", "Key": key})  # fmt: skip
        stub.add_client_error(
            "head_object", service_error_code="404", http_status_code=404,
            expected_params={"Bucket": "ckpt-bucket", "Key": key},
        )  # fmt: skip
        head = tool.botocore_head(client)
        assert head("ckpt-bucket", key) == tool.StoredObject(100, 1_700_000_000_000_000_000)
        assert head("ckpt-bucket", key) is None
        stub.assert_no_pending_responses()
