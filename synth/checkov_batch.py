"""Run checkov several times from one import: what :mod:`synth.scan` starts, never imports.

checkov spends about three seconds importing itself before a scan of about one, so a batch of
scans (every stack, every framework) pays the import once. Each scan then runs in a process
forked from the freshly imported one, exactly as ``checkov ARGS`` would after its imports:
checkov keeps what it parsed in module and class state (its runners keep their last context
and read nothing new, its IAM checks cache policy documents by address), so scans that shared
a process would see each other's files. checkov's own loop over several ``--directory``
values shares that state and merges each directory's report into the next.

Run by the interpreter of checkov's virtualenv, ``python -I checkov_batch.py ANSWERS``: reads
a JSON list of argument lists on standard input, runs up to as many scans at once as there are
CPUs, and writes ``ANSWERS/<n>.json`` for the n-th: ``{"exit", "stdout", "error"}``.
"""

import contextlib
import io
import json
import os
import sys
import traceback
import warnings
from pathlib import Path


def _scan(argv: list[str], answer: Path) -> None:
    """Run ``checkov argv`` in this (forked) process and write its answer to ``answer``."""
    # Only checkov's own virtualenv has it: importing this module elsewhere must still work.
    from checkov.main import Checkov  # type: ignore[import-not-found]  # noqa: PLC0415

    captured, exit_code, error = io.StringIO(), None, ""
    sys.argv = ["checkov", *argv]  # checkov looks for a config file beside --directory here
    try:
        with contextlib.redirect_stdout(captured), warnings.catch_warnings():
            warnings.simplefilter("ignore", category=SyntaxWarning)
            exit_code = Checkov(argv).run()
    except SystemExit as exc:
        exit_code = exc.code
    except Exception:  # one scan's crash is that scan's answer, not the batch's
        error = traceback.format_exc()[-2000:]
    answer.write_text(
        json.dumps({"exit": exit_code, "stdout": captured.getvalue(), "error": error})
    )


def main() -> None:
    """Import checkov, then fork one process per argument list read from standard input."""
    import checkov.main  # type: ignore[import-not-found]  # noqa: F401, PLC0415  # once, before forking

    answers = Path(sys.argv[1])
    jobs: list[list[str]] = json.load(sys.stdin)
    running: set[int] = set()
    for index, argv in enumerate(jobs):
        if len(running) >= (os.cpu_count() or 1):
            pid, _ = os.wait()
            running.discard(pid)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _scan(argv, answers / f"{index}.json")
            finally:
                sys.stderr.flush()
                os._exit(0)
        running.add(pid)
    for pid in running:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
