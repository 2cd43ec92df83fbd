"""Grade one file or notebook with the isolated engine from inside another tool's process (nbgrader, otter,
Gradescope's run_autograder). The wording of the result for those tools is in `text`.

    result = grade_path(Path("attention.ipynb"), student="alice")      # -> SubmissionResult, never raises

One Sandbox per process, started on first use (about 2 s) and closed at exit. Environment knobs (all optional):
AUTOGRADER_LOAD_SECONDS, AUTOGRADER_CALL_SECONDS, AUTOGRADER_TOTAL_SECONDS (wall-clock limits), AUTOGRADER_MEMORY_MIB,
and AUTOGRADER_ISOLATION=off to run without isolation (trusted code on your own machine only).
"""
from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

from autograder.engine.checks import Suite, load_suite
from autograder.engine.results import SubmissionResult
from autograder.engine.runner import grade_file, ungradable
from autograder.sandbox.client import Sandbox
from autograder.sandbox.limits import Limits

log = logging.getLogger(__name__)

DEFAULT_ASSIGNMENT = "attention"
LIMIT_KNOBS = {"AUTOGRADER_LOAD_SECONDS": "load_seconds", "AUTOGRADER_CALL_SECONDS": "call_seconds",
               "AUTOGRADER_TOTAL_SECONDS": "total_seconds"}
_lock = threading.Lock()
_sandbox: Sandbox | None = None
_suites: dict[str, tuple[Suite, dict]] = {}


def limits_from_env() -> Limits:
    """Default limits, overridden by the AUTOGRADER_* variables that are set."""
    changes = {field: float(os.environ[var]) for var, field in LIMIT_KNOBS.items() if os.environ.get(var)}
    if os.environ.get("AUTOGRADER_MEMORY_MIB"):
        changes["memory_bytes"] = int(os.environ["AUTOGRADER_MEMORY_MIB"]) << 20
    return dataclasses.replace(Limits(), **changes)


def isolate() -> bool:
    return os.environ.get("AUTOGRADER_ISOLATION", "required").lower() not in ("off", "0", "no", "false")


def suite_and_refs(assignment: str) -> tuple[Suite, dict]:
    with _lock:
        if assignment not in _suites:
            suite = load_suite(assignment)
            _suites[assignment] = (suite, suite.references())
        return _suites[assignment]


def sandbox(secrets: list[str] = ()) -> Sandbox:
    """The process-wide sandbox, started on first use; `secrets` count only on that first call."""
    global _sandbox
    with _lock:
        if _sandbox is None:
            _sandbox = Sandbox(limits_from_env(), isolate=isolate(), secrets=[str(s) for s in secrets])
            atexit.register(close)
        return _sandbox


def close() -> None:
    global _sandbox
    with _lock:
        box, _sandbox = _sandbox, None
    if box is not None:
        box.close()


def grade_path(path: Path, student: str = "student", assignment: str = DEFAULT_ASSIGNMENT,
               secrets: list[str] = ()) -> SubmissionResult:
    """Grade one .py or .ipynb in the sandbox. Never raises: a grader failure is a 0-point result saying why."""
    started = time.perf_counter()
    suite, refs = suite_and_refs(assignment)
    try:
        return grade_file(Path(path), student, suite, sandbox(secrets), limits_from_env(), refs)
    except Exception as e:  # sandbox unavailable, internal error: fail closed, with the reason
        log.exception("grading %s failed", path)
        return ungradable(student, suite, Path(path), f"the grader could not run: {type(e).__name__}: {e}",
                          f"评分程序无法运行：{type(e).__name__}: {e}", started)


def grade_text(text: str, filename: str, student: str = "student", assignment: str = DEFAULT_ASSIGNMENT,
               secrets: list[str] = ()) -> SubmissionResult:
    """Grade a submission given as text (e.g. a notebook nbgrader has sanitized), through a private temp file."""
    with tempfile.TemporaryDirectory(prefix="autograder-submission-") as folder:
        path = Path(folder) / filename
        path.write_text(text, encoding="utf-8")
        return grade_path(path, student, assignment, secrets)
