"""The reference-data lock and scripts/fetch-reference: the lock pins every file the tests read,
matches the data present, and the fetcher fills an empty directory from a (local) mirror but
refuses any file whose sha256 differs."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ci.make_lock import reference_files
from ci.reference import (
    DEFAULT_BASE_URL,
    LOCK_PATH,
    REFERENCE_ENV,
    LockedFile,
    LockError,
    dump_lock,
    fetch_reference,
    load_lock,
    source_url,
)
from components import versions
from synth.stackfile import REPOSITORY_ROOT
from tests.reference_paths import chart_dir
from tests.test_scheduling import CHART_VALUES
from tests.test_slurm import MARIADB_CRDS, SLINKY_CRDS

FETCH = REPOSITORY_ROOT / "scripts" / "fetch-reference"
RAW_URL = re.compile(
    r"https://raw\.githubusercontent\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[0-9a-f]{40}/[^?#]+"
)
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _locked() -> dict[str, LockedFile]:
    return {entry.path: entry for entry in load_lock()}


# --------------------------------------------------------------------------- the lock itself


def test_lock_is_well_formed() -> None:
    entries = load_lock()
    assert entries, "the lock pins nothing"
    assert [e.path for e in entries] == sorted(e.path for e in entries)
    for entry in entries:
        assert RAW_URL.fullmatch(entry.url), f"{entry.path}: not a raw GitHub URL at a commit"
        assert entry.path.split("/", 1)[0] in {"crds", "charts", "aws"}, entry.path
    # The file is exactly what dump_lock writes (sorted, no stray keys).
    assert LOCK_PATH.read_text() == dump_lock(entries)


def test_lock_matches_the_reference_data_present(reference_dir: Path) -> None:
    locked = _locked()
    present = set(reference_files(reference_dir))
    assert sorted(present - set(locked)) == [], "files in the reference data but not the lock"
    assert sorted(set(locked) - present) == [], "locked files missing from the reference data"
    for path, entry in locked.items():
        digest = hashlib.sha256((reference_dir / path).read_bytes()).hexdigest()
        assert digest == entry.sha256, f"{path}: expected {entry.sha256}, got {digest}"


def test_every_file_the_tests_read_is_locked() -> None:
    locked = set(_locked())
    charts = [value for value in vars(versions).values() if isinstance(value, versions.HelmChart)]
    assert len(charts) >= 10
    needed = {f"aws/karpenter-v{versions.KARPENTER_VERSION}-cloudformation.yaml", CHART_VALUES}
    for chart in charts:
        needed.add(f"charts/{chart_dir(chart)}/values.yaml")
        assert {
            f"charts/{chart_dir(chart)}/Chart.yaml",
            f"charts/{chart_dir(chart)}/Chart.template.yaml",
        } & locked, f"{chart.chart}: no Chart.yaml locked"
    needed.add(f"charts/{chart_dir(versions.CERT_MANAGER_CHART)}/values.schema.json")
    needed.add(f"charts/kubeflow-trainer/{versions.TRAINER_VERSION}/values.yaml")
    assert sorted(needed - locked) == []
    # CRD directories the tests name, and the schemas every custom kind is validated against.
    for directory in ("/".join(SLINKY_CRDS), "/".join(MARIADB_CRDS)):
        assert any(p.startswith(f"{directory}/") and p.endswith(".yaml") for p in locked)
    for crd in ("karpenter.sh_nodepools", "scheduling.volcano.sh_queues",
                "trainer.kubeflow.org_trainjobs", "jobset.x-k8s.io_jobsets"):  # fmt: skip
        assert any(p.startswith("crds/") and p.endswith(f"/{crd}.yaml") for p in locked), crd


def test_a_malformed_lock_is_refused(tmp_path: Path) -> None:
    good = {"path": "crds/a.yaml", "url": f"{DEFAULT_BASE_URL}/o/r/{COMMIT}/a", "sha256": "0" * 64}
    for bad in (
        {**good, "path": "../escape.yaml"},
        {**good, "path": "/abs.yaml"},
        {**good, "sha256": "ABC"},
        {**good, "url": "http://insecure/a"},
        {**good, "extra": 1},
    ):
        lock = tmp_path / "lock.json"
        lock.write_text(json.dumps({"files": [bad]}))
        with pytest.raises(LockError):
            load_lock(lock)
    lock.write_text(json.dumps({"files": [good, good]}))
    with pytest.raises(LockError, match="duplicate"):
        load_lock(lock)


def test_base_url_replaces_only_the_raw_github_prefix() -> None:
    entry = LockedFile("crds/a.yaml", f"{DEFAULT_BASE_URL}/o/r/{COMMIT}/dir/a.yaml", "0" * 64)
    assert source_url(entry) == entry.url
    assert source_url(entry, "http://127.0.0.1:8000/") == (
        f"http://127.0.0.1:8000/o/r/{COMMIT}/dir/a.yaml"
    )
    with pytest.raises(ValueError, match="cannot rebase"):
        source_url(LockedFile("x", "https://example.invalid/x", "0" * 64), "http://127.0.0.1")


# --------------------------------------------------------------------------- fetching


def _write_lock(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, Path]:
    """A lock for ``files`` and a mirror directory laid out like raw GitHub serving them."""
    mirror = tmp_path / "mirror"
    entries = []
    for index, (path, data) in enumerate(sorted(files.items())):
        upstream = f"upstream/dir{index}/{Path(path).name}"
        (mirror / "owner" / "repo" / COMMIT / upstream).parent.mkdir(parents=True, exist_ok=True)
        (mirror / "owner" / "repo" / COMMIT / upstream).write_bytes(data)
        url = f"{DEFAULT_BASE_URL}/owner/repo/{COMMIT}/{upstream}"
        entries.append(LockedFile(path, url, hashlib.sha256(data).hexdigest()))
    lock = tmp_path / "reference.lock.json"
    lock.write_text(dump_lock(entries))
    return lock, mirror


FILES = {
    "crds/project/v1/example.io_things.yaml": b"kind: CustomResourceDefinition\n",
    "charts/chart/1.0.0/values.yaml": b"replicas: 2\n",
    "charts/chart/1.0.0/Chart.yaml": b"name: chart\nversion: 1.0.0\n",
    "charts/empty/1.0.0/values.yaml": b"",
    "aws/template.yaml": b"Resources: {}\n",
}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        self.requests.append(self.path)


@pytest.fixture
def mirror_server(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """An HTTP server on 127.0.0.1 serving ``tmp_path/mirror``: (base URL, root, request log)."""
    root = tmp_path / "mirror"
    root.mkdir(parents=True, exist_ok=True)
    requests: list[str] = []
    handler = type("Handler", (_QuietHandler,), {"requests": requests})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=root))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root, requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _fetch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FETCH), "--attempts", "1", "--timeout", "10", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_fetch_fills_an_empty_directory_then_only_verifies(
    tmp_path: Path, mirror_server: tuple[str, Path, list[str]]
) -> None:
    base_url, _, requests = mirror_server
    lock, _ = _write_lock(tmp_path, FILES)
    dest = tmp_path / "reference"
    first = _fetch("--lock", str(lock), "--dest", str(dest), "--base-url", base_url)
    assert first.returncode == 0, first.stderr
    assert f"0 verified, {len(FILES)} downloaded, 0 failed" in first.stdout
    for path, data in FILES.items():
        assert (dest / path).read_bytes() == data, path
    assert len(requests) == len(FILES)
    assert not list(dest.rglob("*.part")), "partial downloads left behind"
    # Second run: everything is present, so nothing is requested (works offline).
    second = _fetch("--lock", str(lock), "--dest", str(dest), "--base-url", base_url)
    assert second.returncode == 0, second.stderr
    assert f"{len(FILES)} verified, 0 downloaded" in second.stdout
    assert len(requests) == len(FILES)
    offline = _fetch("--lock", str(lock), "--dest", str(dest), "--offline")
    assert offline.returncode == 0, offline.stderr


def test_fetch_from_a_local_directory_mirror(tmp_path: Path) -> None:
    lock, mirror = _write_lock(tmp_path, FILES)
    dest = tmp_path / "reference"
    result = _fetch("--lock", str(lock), "--dest", str(dest), "--base-url", mirror.as_uri())
    assert result.returncode == 0, result.stderr
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == (
        sorted(FILES)
    )


def test_fetch_refuses_a_tampered_file_already_present(
    tmp_path: Path, mirror_server: tuple[str, Path, list[str]]
) -> None:
    base_url, _, _ = mirror_server
    lock, _ = _write_lock(tmp_path, FILES)
    dest = tmp_path / "reference"
    assert _fetch("--lock", str(lock), "--dest", str(dest), "--base-url", base_url).returncode == 0
    tampered = dest / "charts/chart/1.0.0/values.yaml"
    tampered.write_bytes(b"replicas: 20\n")
    result = _fetch("--lock", str(lock), "--dest", str(dest), "--base-url", base_url)
    assert result.returncode == 1
    expected = hashlib.sha256(FILES["charts/chart/1.0.0/values.yaml"]).hexdigest()
    got = hashlib.sha256(b"replicas: 20\n").hexdigest()
    assert "charts/chart/1.0.0/values.yaml" in result.stderr
    assert f"expected {expected}, got {got}" in result.stderr
    assert tampered.read_bytes() == b"replicas: 20\n", "a differing file is reported, not replaced"


def test_fetch_refuses_a_tampered_download(
    tmp_path: Path, mirror_server: tuple[str, Path, list[str]]
) -> None:
    base_url, root, _ = mirror_server
    lock, _ = _write_lock(tmp_path, FILES)
    served = root / "owner" / "repo" / COMMIT / "upstream" / "dir0" / "template.yaml"
    assert served.is_file()
    served.write_bytes(b"Resources: {Evil: {}}\n")
    dest = tmp_path / "reference"
    result = _fetch("--lock", str(lock), "--dest", str(dest), "--base-url", base_url)
    assert result.returncode == 1
    url = f"{base_url}/owner/repo/{COMMIT}/upstream/dir0/template.yaml"
    assert f"aws/template.yaml: sha256 mismatch in the download from {url}" in result.stderr
    assert hashlib.sha256(FILES["aws/template.yaml"]).hexdigest() in result.stderr
    assert not (dest / "aws/template.yaml").exists(), "a bad download must not be written"
    assert f"{len(FILES) - 1} downloaded, 1 failed" in result.stdout


def test_a_download_failure_names_the_url(
    tmp_path: Path, mirror_server: tuple[str, Path, list[str]]
) -> None:
    base_url, root, _ = mirror_server
    lock, _ = _write_lock(tmp_path, FILES)
    shutil.rmtree(root / "owner" / "repo" / COMMIT / "upstream" / "dir1")
    result = _fetch("--lock", str(lock), "--dest", str(tmp_path / "ref"), "--base-url", base_url)
    assert result.returncode == 1
    assert f"download failed: {base_url}/owner/repo/{COMMIT}/upstream/dir1/" in result.stderr
    assert "404" in result.stderr


def test_offline_reports_missing_files(tmp_path: Path) -> None:
    lock, _ = _write_lock(tmp_path, FILES)
    result = _fetch("--lock", str(lock), "--dest", str(tmp_path / "empty"), "--offline")
    assert result.returncode == 1
    for path in FILES:
        assert f"{path}: missing" in result.stderr


def test_a_download_is_checked_before_it_is_written(tmp_path: Path) -> None:
    entries = [LockedFile("crds/a.yaml", f"{DEFAULT_BASE_URL}/o/r/{COMMIT}/a.yaml", "0" * 64)]
    calls: list[str] = []

    def fake(url: str, timeout: float) -> bytes:
        calls.append(url)
        return b"not what the lock says"

    outcome = fetch_reference(entries, tmp_path, fetch=fake, attempts=1)
    assert calls == [entries[0].url]
    assert outcome.fetched == [] and len(outcome.errors) == 1
    assert not (tmp_path / "crds" / "a.yaml").exists()


def test_the_default_destination_is_the_reference_env(tmp_path: Path) -> None:
    lock, _ = _write_lock(tmp_path, FILES)
    elsewhere = tmp_path / "from-env"
    result = subprocess.run(
        [str(FETCH), "--lock", str(lock), "--offline"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, REFERENCE_ENV: str(elsewhere)},
    )
    assert result.returncode == 1
    assert f"missing from {elsewhere.resolve()}" in result.stderr


def test_the_real_lock_verifies_the_reference_data_offline(reference_dir: Path) -> None:
    result = _fetch("--dest", str(reference_dir), "--offline")
    assert result.returncode == 0, result.stderr
    assert f"{len(load_lock())} verified, 0 downloaded, 0 failed" in result.stdout
