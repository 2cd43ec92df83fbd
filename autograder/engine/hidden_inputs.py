"""Per-student hidden inputs: a per-course secret and the student's id give each student a seed of their own.

    secret = course_secret(out)                           # $AUTOGRADER_COURSE_SECRET, else OUT/course_secret
    seed = student_seed(secret, "lab1", "alice")              # HMAC-SHA256 -> a 63-bit int
    refs = suite.references(seed)                         # that student's hidden inputs and their references

`suite.references(seed)` is `references(assignment, directory, seed)` below: `cases.build_references` run on the
reference solution (`reference_solution.py`, written beside the checks by `autograder release`), a few ms per seed.
Without the secret, knowing the code and one's own id does not tell which inputs the hidden checks use, and a table
built offline from one student's inputs does not fit another's. The gradebook records each student's seed, so a
regrade reproduces the same inputs even if the secret is lost or changed.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import importlib
import importlib.util
import json
import os
import secrets
import threading
import types
from pathlib import Path

ENV = "AUTOGRADER_COURSE_SECRET"
FILENAME = "course_secret"
REFERENCE_SOLUTION = "reference_solution.py"


def course_secret(out: Path) -> str:
    """The course secret: `$AUTOGRADER_COURSE_SECRET` when set, else the file `course_secret` in `out` (the folder
    of the gradebook), created there on first use (32 random bytes as hex, mode 0600)."""
    value = os.environ.get(ENV, "").strip()
    if value:
        return value
    path = Path(out) / FILENAME
    if not path.exists():
        _create(path)
    value = path.read_text(encoding="utf-8").strip()
    if not value:
        raise ValueError(f"{path} is empty: delete it to make a new course secret, or set ${ENV}")
    return value


def _create(path: Path) -> None:
    """Write a fresh secret atomically: a private temp file linked into place, so two graders starting at once
    agree on one secret (the second link fails and that grader reads the first one's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{FILENAME}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(secrets.token_hex(32) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
    finally:
        temp.unlink(missing_ok=True)


def student_seed(secret: str, assignment: str, student: str) -> int:
    """The student's seed for this assignment: HMAC-SHA256(secret, [assignment, student]) cut to 63 bits."""
    message = json.dumps([assignment, student], ensure_ascii=False).encode("utf-8")
    digest = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 1


_solution_lock = threading.Lock()
_solutions: dict[Path, types.ModuleType] = {}


def reference_solution(assignment: str, directory: Path) -> types.ModuleType:
    """The assignment's clean solution (`directory/reference_solution.py`), imported once per process under a
    private module name that is on no import path, so nothing can `import` it by name. Only the grader runs it:
    student code never runs in this process."""
    path = Path(directory) / REFERENCE_SOLUTION
    with _solution_lock:
        if path not in _solutions:
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing: run `autograder release` to write the reference solution")
            spec = importlib.util.spec_from_file_location(f"_autograder_reference_solution_{assignment}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _solutions[path] = module
        return _solutions[path]


def references(assignment: str, directory: Path, seed: int) -> dict:
    """`cases.build_references(reference solution, seed)`: the student's hidden inputs and expected outputs
    (a fresh dict each call; the tensors of recent seeds are cached)."""
    return dict(_cached_references(assignment, Path(directory), int(seed)))


@functools.lru_cache(maxsize=16)
def _cached_references(assignment: str, directory: Path, seed: int) -> types.MappingProxyType:
    cases = importlib.import_module(f"autograder.assignments.{assignment}.cases")
    return types.MappingProxyType(cases.build_references(reference_solution(assignment, directory), seed))
