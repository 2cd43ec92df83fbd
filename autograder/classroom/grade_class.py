"""Grade every submission of a class in parallel into OUT: gradebook first, then the files derived from it.

    run = ClassRun(source, out, suite, limits, isolate=True, jobs=2, mode="new"|"resume"|"force")
    summary = run.grade()        # -> list[SubmissionResult], sorted by student
"""
from __future__ import annotations

import contextlib
import hashlib
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from autograder.engine.checks import Suite
from autograder.engine.results import SubmissionResult
from autograder.engine.runner import grade_file, ungradable
from autograder.sandbox.client import Sandbox
from autograder.sandbox.limits import Limits

from .gradebook import Gradebook
from .intake import Entry, find_submissions

GRADEBOOK = "gradebook.sqlite"


class GradebookExists(Exception):
    pass


ENGINE = Path(__file__).resolve().parents[1] / "engine"


def suite_fingerprint(suite: Suite) -> str:
    """Changes whenever the checks, diagnosis, references or the engine change: such results are regraded."""
    h = hashlib.sha256()
    files = sorted(suite.directory.glob("*.py")) + [suite.directory / "references.npz"] + sorted(ENGINE.glob("*.py"))
    for path in files:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class ClassRun:
    source: Path
    out: Path
    suite: Suite
    limits: Limits
    isolate: bool = True
    jobs: int = 2
    mode: str = "new"          # new: refuse an existing gradebook; resume: skip current results; force: regrade all
    show_progress: bool = True
    sandbox: Sandbox | None = None  # started by the caller (so torch loads in the zygote meanwhile), else here
    on_result: Callable[[SubmissionResult], None] | None = None  # e.g. write its feedback while others grade

    def grade(self) -> tuple[list[SubmissionResult], dict]:
        self.out.mkdir(parents=True, exist_ok=True)
        book = Gradebook(self.out / GRADEBOOK)
        stats = {"graded": 0, "skipped": 0, "seconds": 0.0}
        try:
            if self.mode == "new" and book.count(self.suite.assignment):
                raise GradebookExists(f"{self.out / GRADEBOOK} already holds results: continue with --resume, "
                                      "or regrade everything with --force")
            if self.mode == "force":
                book.clear(self.suite.assignment)
            with tempfile.TemporaryDirectory(prefix="autograder-intake-") as work:
                entries = find_submissions(self.source, self.suite.submission_files, Path(work))
                started = time.perf_counter()
                stats.update(self._grade_entries(entries, book))
                stats["seconds"] = round(time.perf_counter() - started, 3)
            results = book.results(self.suite.assignment, [e.student for e in entries])
        finally:
            book.close()
        return results, stats

    def _grade_entries(self, entries: list[Entry], book: Gradebook) -> dict:
        fingerprint = suite_fingerprint(self.suite)
        todo, skipped = [], 0
        for entry in entries:
            if entry.path is None:
                book.save(ungradable(entry.student, self.suite, None, entry.problem_en, entry.problem_zh), fingerprint)
            elif self.mode == "resume" and book.is_current(self.suite.assignment, entry.student,
                                                           _sha256(entry.path), fingerprint):
                skipped += 1
            else:
                todo.append(entry)
        if not todo:
            return {"graded": 0, "skipped": skipped}
        refs = self.suite.references()
        with contextlib.ExitStack() as stack:
            sandbox = self.sandbox or stack.enter_context(self.start_sandbox())
            self._grade_in(sandbox, todo, refs, book, fingerprint)
            peak = sandbox.peak_worker_memory()
        return {"graded": len(todo), "skipped": skipped, "worker_peak_bytes": peak,
                "worker_cap_bytes": self.limits.memory_bytes}

    def start_sandbox(self) -> Sandbox:
        """The sandbox this run needs; the output and the submissions are secrets hidden from every worker."""
        secrets = [str(self.out.resolve()), str(Path(self.source).resolve())]
        return Sandbox(self.limits, isolate=self.isolate, secrets=secrets, slots=2 * self.jobs)

    def _grade_in(self, sandbox: Sandbox, todo: list[Entry], refs: dict, book: Gradebook, fingerprint: str) -> None:
        with ThreadPoolExecutor(self.jobs, thread_name_prefix="grade") as pool, \
                Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                         TextColumn("{task.description}"), disable=not self.show_progress, transient=False) as bar:
            task = bar.add_task("", total=len(todo))
            pending = {pool.submit(grade_file, e.path, e.student, self.suite, sandbox, self.limits, refs): e
                       for e in todo}
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        entry = pending.pop(future)
                        result = future.result()
                        book.save(result, fingerprint)
                        if self.on_result is not None:
                            self.on_result(result)
                        bar.update(task, advance=1, description=entry.student)
            except BaseException:
                for future in pending:
                    future.cancel()
                raise


def _sha256(path: Path) -> str | None:
    try:
        if path.is_symlink():
            return None
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
