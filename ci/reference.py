"""Fetch the pinned upstream reference data (CRDs, chart values) and verify it against the lock.

``ci/reference.lock.json`` lists every file of the reference data: its path under the reference
directory, the raw GitHub URL it is downloaded from (repository, commit, path in the
repository) and its sha256. :func:`fetch_reference` keeps a file that is already there with the
locked sha256, downloads a missing one (then checks it before writing it) and reports a file
whose sha256 differs, so with complete data it only verifies and needs no network.

Standard library only: ``scripts/fetch-reference`` runs this before the virtualenv exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Final

REPOSITORY_ROOT: Final = Path(__file__).resolve().parent.parent
LOCK_PATH: Final = Path(__file__).resolve().with_name("reference.lock.json")
REFERENCE_ENV: Final = "TRAINING_PLATFORM_REFERENCE_DIR"
"""Where the tests read the reference data (tests/conftest.py); also this tool's default."""
DEFAULT_BASE_URL: Final = "https://raw.githubusercontent.com"
"""Prefix of every locked URL; ``--base-url`` replaces it (a mirror, or a local test server)."""
LOCK_COMMENT: Final = (
    "Upstream reference data the tests read, pinned by sha256. scripts/fetch-reference "
    "downloads missing files from these URLs and refuses any file whose sha256 differs. "
    "Regenerate with `python -m ci.make_lock ../shared` (see docs/ci.md)."
)
_SHA256: Final = re.compile(r"[0-9a-f]{64}")

Fetch = Callable[[str, float], bytes]
"""Downloads one URL (with a timeout in seconds) and returns its body."""


class LockError(Exception):
    """The lock file is malformed."""


@dataclass(frozen=True)
class LockedFile:
    """One file of the reference data as the lock pins it."""

    path: str
    """Relative path under the reference directory, with forward slashes."""
    url: str
    """Where it is downloaded from."""
    sha256: str
    """Lowercase hex digest of its exact bytes."""


@dataclass
class Outcome:
    """What one run of :func:`fetch_reference` did."""

    kept: list[str] = field(default_factory=list)
    """Paths that were present with the locked sha256."""
    fetched: list[str] = field(default_factory=list)
    """Paths that were downloaded, verified and written."""
    errors: list[str] = field(default_factory=list)
    """One message per file that is missing, differs or could not be downloaded."""


def _checked_entry(raw: Any, index: int) -> LockedFile:
    if not isinstance(raw, dict) or set(raw) != {"path", "url", "sha256"}:
        raise LockError(f"entry {index}: needs exactly the keys path, url, sha256: {raw!r}")
    path, url, digest = raw["path"], raw["url"], raw["sha256"]
    if not all(isinstance(value, str) for value in (path, url, digest)):
        raise LockError(f"entry {index}: path, url and sha256 must be strings")
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or str(pure) != path:
        raise LockError(f"entry {index}: path must be relative and normalized: {path!r}")
    if not url.startswith("https://"):
        raise LockError(f"entry {index} ({path}): url must be https: {url!r}")
    if not _SHA256.fullmatch(digest):
        raise LockError(f"entry {index} ({path}): sha256 must be 64 lowercase hex: {digest!r}")
    return LockedFile(path=path, url=url, sha256=digest)


def load_lock(lock_path: Path = LOCK_PATH) -> list[LockedFile]:
    """The entries of a lock file, validated.

    Args:
        lock_path: the lock file (default: ``ci/reference.lock.json``).

    Raises:
        LockError: not a lock (wrong shape, bad path, URL or digest, duplicate path).
    """
    try:
        document = json.loads(lock_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LockError(f"cannot read lock {lock_path}: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("files"), list):
        raise LockError(f"{lock_path}: expected an object with a 'files' list")
    entries = [_checked_entry(raw, index) for index, raw in enumerate(document["files"])]
    paths = [entry.path for entry in entries]
    duplicates = sorted({path for path in paths if paths.count(path) > 1})
    if duplicates:
        raise LockError(f"{lock_path}: duplicate paths {duplicates}")
    return entries


def dump_lock(entries: Sequence[LockedFile]) -> str:
    """The text of a lock file holding ``entries`` (sorted by path).

    Args:
        entries: the files to pin.
    """
    files = [
        {"path": entry.path, "url": entry.url, "sha256": entry.sha256}
        for entry in sorted(entries, key=lambda entry: entry.path)
    ]
    return json.dumps({"comment": LOCK_COMMENT, "files": files}, indent=2) + "\n"


def default_reference_dir() -> Path:
    """``$TRAINING_PLATFORM_REFERENCE_DIR``, else ``../shared`` beside the checkout."""
    return Path(os.environ.get(REFERENCE_ENV, REPOSITORY_ROOT.parent / "shared")).resolve()


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file's bytes.

    Args:
        path: the file to hash.
    """
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_url(entry: LockedFile, base_url: str | None = None) -> str:
    """Where to download ``entry`` from: its locked URL, or the same path under ``base_url``.

    Args:
        entry: the locked file.
        base_url: replaces the ``https://raw.githubusercontent.com`` prefix (a mirror laid out
            as ``<owner>/<repo>/<commit>/<path>``, e.g. ``http://127.0.0.1:8000`` or
            ``file:///srv/mirror``); None keeps the locked URL.

    Raises:
        ValueError: ``base_url`` is given but the locked URL is not under the default prefix.
    """
    if base_url is None:
        return entry.url
    prefix = f"{DEFAULT_BASE_URL}/"
    if not entry.url.startswith(prefix):
        raise ValueError(f"{entry.path}: {entry.url} is not under {prefix}; cannot rebase it")
    return f"{base_url.rstrip('/')}/{entry.url.removeprefix(prefix)}"


def _urlopen(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


def _download(url: str, fetch: Fetch, timeout: float, attempts: int) -> bytes:
    """The body at ``url``; retries network errors and server errors, not 4xx answers."""
    for attempt in range(1, attempts + 1):
        try:
            return fetch(url, timeout)
        except urllib.error.HTTPError as exc:
            if exc.code < 500 or attempt == attempts:
                raise
        except (urllib.error.URLError, OSError):
            if attempt == attempts:
                raise
        time.sleep(attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def fetch_reference(
    entries: Sequence[LockedFile],
    dest: Path,
    *,
    base_url: str | None = None,
    offline: bool = False,
    timeout: float = 60.0,
    attempts: int = 3,
    fetch: Fetch = _urlopen,
) -> Outcome:
    """Make ``dest`` hold every locked file with its locked sha256.

    A file already there with the right sha256 is kept; one with another sha256 is an error
    (and left as it is); a missing one is downloaded, verified and only then written.

    Args:
        entries: the lock's entries.
        dest: the reference directory to fill or verify.
        base_url: download from this mirror instead of raw GitHub (see :func:`source_url`).
        offline: never download: a missing file is an error.
        timeout: seconds per download attempt.
        attempts: tries per file for network and server errors.
        fetch: the downloader (tests pass their own).
    """
    outcome = Outcome()
    for entry in entries:
        target = dest / entry.path
        if target.exists() or target.is_symlink():
            if not target.is_file():
                outcome.errors.append(f"{entry.path}: {target} exists but is not a file")
                continue
            got = sha256_of(target)
            if got == entry.sha256:
                outcome.kept.append(entry.path)
            else:
                outcome.errors.append(
                    f"{entry.path}: sha256 mismatch in {target}: expected {entry.sha256}, got {got}"
                )
            continue
        try:
            url = source_url(entry, base_url)
        except ValueError as exc:
            outcome.errors.append(str(exc))
            continue
        if offline:
            outcome.errors.append(f"{entry.path}: missing from {dest} (offline; source {url})")
            continue
        try:
            data = _download(url, fetch, timeout, attempts)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            outcome.errors.append(f"{entry.path}: download failed: {url}: {exc}")
            continue
        got = hashlib.sha256(data).hexdigest()
        if got != entry.sha256:
            outcome.errors.append(
                f"{entry.path}: sha256 mismatch in the download from {url}: "
                f"expected {entry.sha256}, got {got} (not written)"
            )
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.part")
        partial.write_bytes(data)
        partial.replace(target)
        outcome.fetched.append(entry.path)
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of ``scripts/fetch-reference``; returns the exit status.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="scripts/fetch-reference",
        description="Download the pinned upstream CRDs and chart values into the reference "
        "directory and verify every file against ci/reference.lock.json.",
    )
    parser.add_argument(
        "--dest",
        type=Path,
        default=None,
        help=f"reference directory (default: ${REFERENCE_ENV}, else ../shared)",
    )
    parser.add_argument("--lock", type=Path, default=LOCK_PATH, help="lock file")
    parser.add_argument(
        "--base-url",
        default=None,
        help=f"download from this mirror instead of {DEFAULT_BASE_URL} "
        "(same <owner>/<repo>/<commit>/<path> layout; http(s):// or file://)",
    )
    parser.add_argument(
        "--offline", action="store_true", help="only verify; a missing file is an error"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per download")
    parser.add_argument("--attempts", type=int, default=3, help="tries per download")
    args = parser.parse_args(argv)
    dest: Path = (args.dest or default_reference_dir()).resolve()
    try:
        entries = load_lock(args.lock)
    except LockError as exc:
        print(f"fetch-reference: {exc}", file=sys.stderr)
        return 2
    outcome = fetch_reference(
        entries,
        dest,
        base_url=args.base_url,
        offline=args.offline,
        timeout=args.timeout,
        attempts=max(1, args.attempts),
    )
    for error in outcome.errors:
        print(f"fetch-reference: {error}", file=sys.stderr)
    print(
        f"fetch-reference: {dest}: {len(outcome.kept)} verified, "
        f"{len(outcome.fetched)} downloaded, {len(outcome.errors)} failed "
        f"(of {len(entries)} locked files)"
    )
    return 1 if outcome.errors else 0


if __name__ == "__main__":
    sys.exit(main())
