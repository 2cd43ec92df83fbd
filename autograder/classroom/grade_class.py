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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from autograder.engine.checks import Suite
from autograder.engine.hidden_inputs import course_secret, student_seed
from autograder.engine.results import SubmissionResult
from autograder.engine.runner import grade_file, ungradable
from autograder.report.render import terminal_text
from autograder.sandbox.client import Sandbox
from autograder.sandbox.limits import Limits
from autograder.public.text import Text

from .gradebook import Gradebook, check_statuses
from .regrade import diff
from .intake import NO_SUBMISSION, Entry, find_submissions, gradescope_submitters
from .late import Deadline
from .roster import Roster, apply_roster
from .similarity import graded_source, similar_pairs
from .times import with_times

GRADEBOOK = "gradebook.sqlite"


class GradebookExists(Exception):
    pass


PACKAGE = Path(__file__).resolve().parents[1]
SCORING = ("public", "engine", "sandbox")  # every module that can change a score: comparisons, checks, the worker


def suite_fingerprint(suite: Suite) -> str:
    """Changes whenever the checks, published facts, diagnosis, cases, the reference solution, the public runtime,
    the engine or the sandbox change: such results are regraded. (The references are a function of cases.py, reference_solution.py and each student's
    seed; the sandbox decides what a worker can do and what comes back, e.g. the forbidden-API block.)"""
    h = hashlib.sha256()
    own = PACKAGE / "assignments" / suite.assignment
    files = sorted(own.glob("*.py"))  # spec, checks, public checks, diagnosis, cases and reference_solution.py
    files += sorted(own.glob("public_facts.json"))  # what the public checks compare with
    if own / "reference_solution.py" not in files:
        raise FileNotFoundError(f"{own / 'reference_solution.py'} is missing: run `autograder release`")
    files += [p for part in SCORING for p in sorted((PACKAGE / part).glob("*.py"))]
    for path in files:
        h.update(str(path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE.parent) else path.name).encode()
                 + b"\0" + path.read_bytes())
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
    layout: str = "auto"       # auto | folders | nbgrader: see intake.find_submissions
    roster: Roster | None = None  # the class list: submissions renamed to roster ids, non-submitters get a row
    deadline: Deadline | None = None  # due date and late policy (classroom/late.py): penalties at read time
    timestamps: dict[str, datetime] | None = None  # submission times by download name or student id
    regraded_alone: list[str] = field(default_factory=list)  # timed out beside a neighbour, graded again alone

    def grade(self) -> tuple[list[SubmissionResult], dict]:
        self.out.mkdir(parents=True, exist_ok=True)
        book = Gradebook(self.out / GRADEBOOK)
        stats = {"graded": 0, "skipped": 0, "seconds": 0.0}
        try:
            if self.mode == "new" and book.count(self.suite.assignment):
                raise GradebookExists(f"{self.out / GRADEBOOK} already holds results: continue with --resume, "
                                      "or regrade everything with --force")
            known_seeds = book.seeds(self.suite.assignment)  # read before --force clears: a regrade reuses them
            before = book.snapshot(self.suite.assignment)     # what this run changes is reported (regrade.diff)
            if self.mode == "force":
                book.clear(self.suite.assignment)
            with tempfile.TemporaryDirectory(prefix="autograder-intake-") as work:
                notes: list[str] = []
                tz = self.deadline.due.tzinfo if self.deadline is not None else timezone.utc
                entries = find_submissions(self.source, self.suite.submission_files, Path(work), self.layout,
                                           notes=notes, tz=tz)
                entries = with_times(entries, self.timestamps, tz)
                if self.roster is not None:
                    entries = gradescope_submitters(entries, self.roster, notes)
                    entries, stats["roster"] = apply_roster(entries, self.roster)
                    stats["roster"]["students"] = {s.id: {"name": s.name, "section": s.section}
                                                   for s in self.roster.students}  # for the report's table
                else:
                    entries = gradescope_submitters(entries, None, notes)
                stats["intake"] = notes
                self._record_times(book, entries)
                started = time.perf_counter()
                stats.update(self._grade_entries(entries, book, known_seeds))
                stats["seconds"] = round(time.perf_counter() - started, 3)
                stats["similarity"] = self._similarity(entries, book)
            if "roster" in stats:  # absent from this download but graded from an earlier one: not "no submission"
                stats["roster"]["no_submission"] = [s for s in stats["roster"]["no_submission"]
                                                    if not book.has_graded(self.suite.assignment, s)]
            # with a roster the course is everyone the gradebook holds (a section's download adds to the others');
            # without one, the students of this input
            results = book.results(self.suite.assignment, None if self.roster else [e.student for e in entries])
            if before:
                stats["regrade"] = diff(before, {r.student: (r.score, check_statuses(r)) for r in results})
        finally:
            book.close()
        return results, stats

    def _similarity(self, entries: list[Entry], book: Gradebook) -> dict:
        """Flagged pairs of similar code (classroom/similarity.py) across everything the gradebook holds (earlier
        downloads too: the graded functions' source is kept there), for the report; never a score."""
        from dataclasses import asdict

        from autograder.engine.resolve import REPO_ROOT

        functions = self.suite.spec.functions
        stub_path = REPO_ROOT / "student_template" / self.suite.assignment / self.suite.spec.module
        stub = graded_source(stub_path, functions) if stub_path.is_file() else ""
        for e in entries:
            if e.path is not None:
                book.save_source(self.suite.assignment, e.student, graded_source(e.path, functions))
        found = similar_pairs(book.sources(self.suite.assignment), stub)
        return {**found, "pairs": [asdict(p) for p in found["pairs"]]}

    def _record_times(self, book: Gradebook, entries: list[Entry]) -> None:
        """Submission times (and the deadline) go to the gradebook: the late penalty is computed when results are
        read, so a moved due date changes it without a regrade."""
        if self.deadline is not None:
            book.set_deadline(self.suite.assignment, self.deadline)
        for e in entries:
            at = self.timestamps.get(e.student, e.submitted_at) if self.timestamps else e.submitted_at
            if at is not None or e.late_marker or e.time_source:
                book.record_time(self.suite.assignment, e.student, at, e.time_source or "timestamps CSV",
                                 e.late_marker)

    def _grade_entries(self, entries: list[Entry], book: Gradebook, known_seeds: dict[str, int]) -> dict:
        fingerprint = suite_fingerprint(self.suite)
        seeds = self.seeds(entries, known_seeds)
        todo, skipped = [], 0
        for entry in entries:
            if entry.path is None and entry.problem_en == NO_SUBMISSION and self.mode != "force" and \
                    book.has_graded(self.suite.assignment, entry.student):
                skipped += 1  # absent from this download (another section's zip): what was graded stays
            elif entry.path is None:
                why = Text(zh=entry.problem_zh, en=entry.problem_en)
                book.save(ungradable(entry.student, self.suite, None, why), fingerprint, seeds[entry.student])
            elif self.mode == "resume" and book.is_current(self.suite.assignment, entry.student,
                                                           _sha256(entry.path), fingerprint):
                skipped += 1
            else:
                todo.append(entry)
        if not todo:
            return {"graded": 0, "skipped": skipped}
        self.suite.references(seeds[todo[0].student])  # a missing reference solution fails here, before grading
        with contextlib.ExitStack() as stack:
            sandbox = self.sandbox or stack.enter_context(self.start_sandbox())
            self._grade_in(sandbox, todo, seeds, book, fingerprint)
            peak = sandbox.peak_worker_memory()
        return {"graded": len(todo), "skipped": skipped, "worker_peak_bytes": peak,
                "worker_cap_bytes": self.limits.memory_bytes, "regraded_alone": len(self.regraded_alone),
                "isolation": sandbox.tier.to_json()}

    def start_sandbox(self) -> Sandbox:
        """The sandbox this run needs; the output and the submissions are secrets hidden from every worker."""
        secrets = [str(self.out.resolve()), str(Path(self.source).resolve())]
        return Sandbox(self.limits, isolate=self.isolate, secrets=secrets, slots=2 * self.jobs,
                       forbidden=list(self.suite.forbidden))

    def seeds(self, entries: list[Entry], known: dict[str, int]) -> dict[str, int]:
        """student -> hidden-input seed: the one the gradebook recorded (so a regrade draws the same inputs, even
        if the course secret was lost), else one drawn from the course secret and the student's id."""
        secret, seeds = None, {}
        for entry in entries:
            if entry.student in known:
                seeds[entry.student] = known[entry.student]
            else:
                secret = secret or course_secret(self.out)
                seeds[entry.student] = student_seed(secret, self.suite.assignment, entry.student)
        return seeds

    def _grade_one(self, entry: Entry, seed: int, sandbox: Sandbox) -> SubmissionResult:
        """Grade one submission against the references of its own hidden inputs (built in this thread)."""
        return grade_file(entry.path, entry.student, self.suite, sandbox, self.limits, self.suite.references(seed))

    def _grade_in(self, sandbox: Sandbox, todo: list[Entry], seeds: dict[str, int], book: Gradebook,
                  fingerprint: str) -> None:
        with ThreadPoolExecutor(self.jobs, thread_name_prefix="grade") as pool, \
                Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                         TextColumn("{task.description}"), disable=not self.show_progress, transient=False) as bar:
            task = bar.add_task("", total=len(todo))
            pending = {pool.submit(self._grade_one, e, seeds[e.student], sandbox): e for e in todo}
            alone: list[Entry] = []  # timed out beside a neighbour: graded again, alone, before it counts
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        entry = pending.pop(future)
                        result = future.result()
                        if self.jobs > 1 and _timed_out(result):
                            alone.append(entry)
                            continue
                        self._keep(result, entry, seeds, book, fingerprint)
                        bar.update(task, advance=1, description=terminal_text(entry.student))
            except BaseException:
                for future in pending:
                    future.cancel()
                raise
            self.regraded_alone = [e.student for e in alone]
            for entry in alone:  # nothing else runs now: a timeout here is the submission's own
                bar.update(task, description=terminal_text(f"{entry.student} (again, alone)"))
                self._keep(self._grade_one(entry, seeds[entry.student], sandbox), entry, seeds, book, fingerprint)
                bar.update(task, advance=1)

    def _keep(self, result: SubmissionResult, entry: Entry, seeds: dict[str, int], book: Gradebook,
              fingerprint: str) -> None:
        book.save(result, fingerprint, seeds[entry.student])
        if self.on_result is not None:  # with the course staff's overrides, as every later reader sees it
            self.on_result(book.result(self.suite.assignment, result.student))


def _timed_out(result: SubmissionResult) -> bool:
    return any(c.status == "timeout" for c in result.checks)


def _sha256(path: Path) -> str | None:
    try:
        if path.is_symlink():
            return None
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
