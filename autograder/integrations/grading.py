"""Grade one file or notebook with the isolated engine from inside another tool's process (nbgrader, otter,
Gradescope's run_autograder). The wording of the result for those tools is in `text`.

    result = grade_path(Path("lab.ipynb"), "lab", student="alice")    # -> SubmissionResult, never raises

One Sandbox per process, started on first use (about 2 s) and closed at exit. Environment knobs (all optional):
AUTOGRADER_LOAD_SECONDS, AUTOGRADER_CALL_SECONDS, AUTOGRADER_TOTAL_SECONDS (wall-clock limits), AUTOGRADER_MEMORY_MIB,
AUTOGRADER_ISOLATION=off to run without isolation (trusted code on your own machine only), and
AUTOGRADER_COURSE_SECRET, the course secret the hidden inputs are drawn from with the student's id (see `seed_for`).
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import os
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from autograder.assignments import get, infer
from autograder.engine.checks import Suite, load_suite
from autograder.engine.hidden_inputs import ENV as SECRET_ENV, course_secret, student_seed
from autograder.engine.results import SubmissionResult
from autograder.engine.runner import grade_file, ungradable
from autograder.sandbox.client import Sandbox
from autograder.sandbox.limits import Limits
from autograder.public.text import Text

log = logging.getLogger(__name__)

LIMIT_KNOBS = {"AUTOGRADER_LOAD_SECONDS": "load_seconds", "AUTOGRADER_CALL_SECONDS": "call_seconds",
               "AUTOGRADER_TOTAL_SECONDS": "total_seconds"}
_lock = threading.Lock()
_sandbox: Sandbox | None = None
_suites: dict[str, Suite] = {}


def limits_from_env(assignment: str) -> Limits:
    """The assignment's default limits, overridden by the AUTOGRADER_* variables that are set."""
    changes = {field: float(os.environ[var]) for var, field in LIMIT_KNOBS.items() if os.environ.get(var)}
    if os.environ.get("AUTOGRADER_MEMORY_MIB"):
        changes["memory_bytes"] = int(os.environ["AUTOGRADER_MEMORY_MIB"]) << 20
    return dataclasses.replace(get(assignment).default_limits(), **changes)


def isolate() -> bool:
    return os.environ.get("AUTOGRADER_ISOLATION", "required").lower() not in ("off", "0", "no", "false")


def assignment_for(given: str | None, submission: Path) -> str:
    """The assignment named by the tool's configuration, else the one the submission's file name is for."""
    return get(given).id if given else infer(submission).id


def suite_for(assignment: str) -> Suite:
    with _lock:
        if assignment not in _suites:
            _suites[assignment] = load_suite(assignment)
        return _suites[assignment]


def seed_for(assignment: str, student: str, course: Path | None = None, shipped: Path | None = None) -> int:
    """The student's hidden-input seed, from the course secret: $AUTOGRADER_COURSE_SECRET when set; else the file
    `course_secret` in `course`, a folder that outlives this run (nbgrader's course root), created there on first
    use; else the file `shipped` when it exists (read only: `source/course_secret` of a Gradescope or otter
    autograder folder, which the Gradescope setup.sh writes once per image, or which the instructor adds to the zip).
    With none of these there is no place to keep a secret (e.g. `otter run` unpacks into a fresh temporary folder),
    so the secret is derived from the assignment id: inputs still differ per student and a regrade reproduces them,
    but anyone who reads this code can compute them."""
    if os.environ.get(SECRET_ENV, "").strip():
        secret = os.environ[SECRET_ENV].strip()
    elif course is not None:
        secret = course_secret(course)
    elif shipped is not None and shipped.is_file() and shipped.read_text(encoding="utf-8").strip():
        secret = shipped.read_text(encoding="utf-8").strip()
    else:
        log.warning("no course secret (%s, or a course_secret file): hidden inputs derived from the assignment id",
                    SECRET_ENV)
        secret = f"derived from the assignment id, not secret: {assignment}"
    return student_seed(secret, assignment, student)


def sandbox(secrets: list[str], assignment: str) -> Sandbox:
    """The process-wide sandbox, started on first use; `secrets` and `assignment` count only on that first call."""
    global _sandbox
    with _lock:
        if _sandbox is None:
            _sandbox = Sandbox(limits_from_env(assignment), isolate=isolate(), secrets=[str(s) for s in secrets],
                               forbidden=list(get(assignment).forbidden))
            atexit.register(close)
        return _sandbox


def close() -> None:
    global _sandbox
    with _lock:
        box, _sandbox = _sandbox, None
    if box is not None:
        box.close()


def grade_path(path: Path, assignment: str, student: str = "student",
               secrets: list[str] = (), seed: int | None = None, course: Path | None = None) -> SubmissionResult:
    """Grade one .py or .ipynb in the sandbox, on the hidden inputs of `seed` (default: `seed_for(assignment,
    student, course)`). Never raises: a grader failure is a 0-point result saying why."""
    started = time.perf_counter()
    suite = suite_for(assignment)
    try:
        refs = suite.references(seed if seed is not None else seed_for(assignment, student, course))
        return grade_file(Path(path), student, suite, sandbox(secrets, assignment), limits_from_env(assignment), refs)
    except Exception as e:  # sandbox unavailable, internal error: fail closed, with the reason
        log.exception("grading %s failed", path)
        return ungradable(student, suite, Path(path), Text(zh=f"评分程序无法运行（{type(e).__name__}，详情见评分日志）",
                                                           en=f"the grader could not run: {type(e).__name__}: {e}"),
                          started)


def grade_text(text: str, filename: str, assignment: str, student: str = "student",
               secrets: list[str] = (), seed: int | None = None, course: Path | None = None) -> SubmissionResult:
    """Grade a submission given as text (e.g. a notebook nbgrader has sanitized), through a private temp file."""
    with tempfile.TemporaryDirectory(prefix="autograder-submission-") as folder:
        path = Path(folder) / filename
        path.write_text(text, encoding="utf-8")
        return grade_path(path, assignment, student, secrets, seed, course)


def gradescope_lateness(root: Path) -> Text | None:
    """A note for the student when Gradescope's `submission_metadata.json` says the submission came after the due
    date (`created_at` > `assignment.due_date`; after `late_due_date` too, if there is one). The score is left alone:
    Gradescope applies the course's own late policy. None when on time or when the metadata is missing or odd."""
    try:
        meta = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
        when = datetime.fromisoformat(str(meta["created_at"]))
        due = datetime.fromisoformat(str(meta["assignment"]["due_date"]))
        late_due = meta["assignment"].get("late_due_date")
        late_due = datetime.fromisoformat(str(late_due)) if late_due else None
        if when.tzinfo is None or due.tzinfo is None or (late_due is not None and late_due.tzinfo is None):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if when <= due:
        return None
    hours = (when - due).total_seconds() / 3600
    shown = due.isoformat(timespec="minutes")
    if late_due is not None and when > late_due:
        return Text(zh=f"提交时间晚于截止时间 {shown} {hours:.1f} 小时，也晚于迟交截止时间 {late_due.isoformat(timespec='minutes')}；"
                       "迟交如何计分由 Gradescope 按课程设置处理。",
                    en=f"Submitted {hours:.1f} h after the due date {shown}, and after the late due date "
                       f"{late_due.isoformat(timespec='minutes')}; Gradescope applies the course's late policy.")
    return Text(zh=f"提交时间晚于截止时间 {shown} {hours:.1f} 小时；迟交如何计分由 Gradescope 按课程设置处理。",
                en=f"Submitted {hours:.1f} h after the due date {shown}; Gradescope applies the course's late policy.")


def gradescope_submitter(root: Path) -> str | None:
    """Who submitted, from Gradescope's `submission_metadata.json` (the user ids, sorted, for a group), or None
    (otter run writes `{}` there)."""
    try:
        users = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8")).get("users") or []
        ids = sorted(str(u["id"]) for u in users if isinstance(u, dict) and u.get("id") is not None)
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return "gradescope:" + ",".join(ids) if ids else None
