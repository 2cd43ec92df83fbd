"""The SQLite gradebook: one row per (assignment, student), written in its own transaction as soon as the student is
graded, so an interrupted run (Ctrl-C, kill -9) loses at most the submissions being graded at that moment."""
from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from autograder.engine.results import SubmissionResult

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    assignment TEXT NOT NULL,
    student    TEXT NOT NULL,
    sha256     TEXT,            -- of the graded file; NULL when nothing could be graded
    suite      TEXT NOT NULL,   -- fingerprint of the checks and references that produced the score
    score      REAL NOT NULL,
    max_score  REAL NOT NULL,
    result     TEXT NOT NULL,   -- the full SubmissionResult as JSON
    graded_at  TEXT NOT NULL,
    seed       INTEGER,         -- the student's hidden-input seed: a regrade reuses it, so it draws the same inputs
    PRIMARY KEY (assignment, student)
);
CREATE TABLE IF NOT EXISTS overrides (  -- course staff's manual changes: kept apart, so a regrade never loses one
    assignment TEXT NOT NULL,
    student    TEXT NOT NULL,
    "check"    TEXT NOT NULL,   -- a check's name, or '' for the submission's total
    score      REAL,            -- NULL: a comment only
    comment    TEXT NOT NULL,
    author     TEXT NOT NULL,
    made_at    TEXT NOT NULL,
    PRIMARY KEY (assignment, student, "check")
);
CREATE TABLE IF NOT EXISTS submitted (  -- when each submission was handed in, as far as anything says
    assignment TEXT NOT NULL,
    student    TEXT NOT NULL,
    at         TEXT,            -- ISO 8601 with offset; NULL: unknown
    source     TEXT NOT NULL,   -- timestamps CSV | timestamp.txt | Blackboard name | ...
    late_marker INTEGER NOT NULL,
    PRIMARY KEY (assignment, student)
);
CREATE TABLE IF NOT EXISTS deadlines (  -- the assignment's due date and late policy (classroom/late.py), as JSON
    assignment TEXT PRIMARY KEY,
    config     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sources (  -- the graded functions' source of each submission (for the similarity check)
    assignment TEXT NOT NULL,
    student    TEXT NOT NULL,
    code       TEXT NOT NULL,
    PRIMARY KEY (assignment, student)
);
CREATE TABLE IF NOT EXISTS history (    -- every grading of every student, oldest first: what each run gave
    assignment TEXT NOT NULL,
    student    TEXT NOT NULL,
    suite      TEXT NOT NULL,
    sha256     TEXT,
    score      REAL NOT NULL,
    checks     TEXT NOT NULL,   -- {check name: status} as JSON
    graded_at  TEXT NOT NULL
);
"""
COLUMNS = ("assignment", "student", "sha256", "suite", "score", "max_score", "result", "graded_at", "seed")


class Gradebook:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, isolation_level=None)  # autocommit; explicit transactions below
        self.db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a committed student survives the grader being killed (kill -9, Ctrl-C) without an fsync
        # per student; only a power cut or kernel crash could lose the last few commits, and --resume regrades them.
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Add the columns a gradebook written by an older version lacks (its rows get NULL there)."""
        have = {row[1] for row in self.db.execute("PRAGMA table_info(results)")}
        if "seed" not in have:
            try:
                self.db.execute("ALTER TABLE results ADD COLUMN seed INTEGER")
            except sqlite3.OperationalError as e:  # another grader added it meanwhile
                if "duplicate column" not in str(e):
                    raise

    def assignments(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT DISTINCT assignment FROM results ORDER BY assignment")]

    def save_source(self, assignment: str, student: str, code: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO sources VALUES (?, ?, ?)", (assignment, student, code))

    def sources(self, assignment: str) -> dict[str, str]:
        return dict(self.db.execute("SELECT student, code FROM sources WHERE assignment = ?", (assignment,)))

    def has_graded(self, assignment: str, student: str) -> bool:
        """A result graded from a file (not a "no submission" row) is stored for the student."""
        row = self.db.execute("SELECT sha256 FROM results WHERE assignment = ? AND student = ?",
                              (assignment, student)).fetchone()
        return row is not None and row[0] is not None

    def count(self, assignment: str) -> int:
        return self.db.execute("SELECT COUNT(*) FROM results WHERE assignment = ?", (assignment,)).fetchone()[0]

    def is_current(self, assignment: str, student: str, sha256: str | None, suite: str) -> bool:
        """Already graded from exactly this file with exactly these checks."""
        if sha256 is None:
            return False
        row = self.db.execute("SELECT sha256, suite FROM results WHERE assignment = ? AND student = ?",
                              (assignment, student)).fetchone()
        return row is not None and row == (sha256, suite)

    def save(self, result: SubmissionResult, suite: str, seed: int | None = None) -> None:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self.db:  # one transaction per student
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(
                f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                (result.assignment, result.student, result.sha256, suite, result.score, result.max_score,
                 json.dumps(result.to_dict(), ensure_ascii=False, sort_keys=True), now, seed))
            self.db.execute("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (result.assignment, result.student, suite, result.sha256, result.score,
                             json.dumps(check_statuses(result), ensure_ascii=False), now))

    def snapshot(self, assignment: str) -> dict[str, tuple[float, dict[str, str]]]:
        """student -> (score, {check: status}) of the current results (what `regrade.diff` compares)."""
        return {r.student: (r.score, check_statuses(r)) for r in self.results(assignment)}

    def history(self, assignment: str, student: str) -> list[tuple[str, float, dict[str, str]]]:
        """(graded_at, score, {check: status}) of every time the student was graded, oldest first."""
        rows = self.db.execute("SELECT graded_at, score, checks FROM history WHERE assignment = ? AND student = ? "
                               "ORDER BY rowid", (assignment, student)).fetchall()
        return [(at, score, json.loads(checks)) for at, score, checks in rows]

    def seeds(self, assignment: str) -> dict[str, int]:
        """student -> the hidden-input seed recorded when they were graded (students graded before seeds existed
        have none)."""
        rows = self.db.execute("SELECT student, seed FROM results WHERE assignment = ? AND seed IS NOT NULL",
                               (assignment,)).fetchall()
        return dict(rows)

    def results(self, assignment: str, students: list[str] | None = None) -> list[SubmissionResult]:
        """The stored results with the course staff's overrides applied (every reader sees the final scores)."""
        rows = self.db.execute("SELECT student, result FROM results WHERE assignment = ? ORDER BY student",
                               (assignment,)).fetchall()
        wanted = None if students is None else set(students)
        changes, deadline, times = self.overrides(assignment), self.deadline(assignment), self.times(assignment)
        return [apply_overrides(SubmissionResult.from_dict(json.loads(r)), changes.get(s, []), deadline, times.get(s))
                for s, r in rows if wanted is None or s in wanted]

    def result(self, assignment: str, student: str) -> SubmissionResult:
        """One student's final result (as `results` gives it), reading that student's row only: called once per
        graded student during a run."""
        row = self.db.execute("SELECT result FROM results WHERE assignment = ? AND student = ?",
                              (assignment, student)).fetchone()
        if row is None:
            raise KeyError(student)
        return apply_overrides(SubmissionResult.from_dict(json.loads(row[0])), self.overrides(assignment).get(student, []),
                               self.deadline(assignment), self.times(assignment).get(student))

    def record_time(self, assignment: str, student: str, at: datetime | None, source: str, late_marker: bool) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO submitted VALUES (?, ?, ?, ?, ?)",
                            (assignment, student, at.isoformat() if at else None, source, int(late_marker)))

    def times(self, assignment: str) -> dict[str, tuple[datetime | None, str, bool]]:
        rows = self.db.execute("SELECT student, at, source, late_marker FROM submitted WHERE assignment = ?",
                               (assignment,)).fetchall()
        return {s: (datetime.fromisoformat(at) if at else None, source, bool(m)) for s, at, source, m in rows}

    def set_deadline(self, assignment: str, deadline) -> None:
        from .late import to_json

        with self.db:
            self.db.execute("INSERT OR REPLACE INTO deadlines VALUES (?, ?)", (assignment, json.dumps(to_json(deadline))))

    def deadline(self, assignment: str):
        from .late import from_json

        row = self.db.execute("SELECT config FROM deadlines WHERE assignment = ?", (assignment,)).fetchone()
        return from_json(json.loads(row[0])) if row else None

    def override(self, assignment: str, student: str, check: str, score: float | None, comment: str,
                 author: str) -> None:
        """Set (or replace) the override of one check ('' = the total) of one student."""
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO overrides VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (assignment, student, check, score, comment, author, now))

    def remove_override(self, assignment: str, student: str, check: str) -> bool:
        with self.db:
            cursor = self.db.execute('DELETE FROM overrides WHERE assignment = ? AND student = ? AND "check" = ?',
                                     (assignment, student, check))
        return cursor.rowcount > 0

    def overrides(self, assignment: str) -> dict[str, list[dict]]:
        rows = self.db.execute('SELECT student, "check", score, comment, author, made_at FROM overrides '
                               'WHERE assignment = ? ORDER BY student, "check"', (assignment,)).fetchall()
        found: dict[str, list[dict]] = {}
        for student, check, score, comment, author, made_at in rows:
            found.setdefault(student, []).append({"check": check, "score": score, "comment": comment,
                                                  "author": author, "made_at": made_at})
        return found

    def clear(self, assignment: str) -> None:
        with self.db:
            self.db.execute("DELETE FROM results WHERE assignment = ?", (assignment,))

    def close(self) -> None:
        self.db.close()


def check_statuses(result: SubmissionResult) -> dict[str, str]:
    return {c.name: c.status for c in result.checks}


def apply_overrides(result: SubmissionResult, changes: list[dict], deadline=None,
                    time: tuple[datetime | None, str, bool] | None = None) -> SubmissionResult:
    """The final score: the overrides' scores in place of the grader's (a check's within 0..its points), then the
    late penalty of `deadline` (classroom/late.py) on that, then an override of the total (within 0..max_score),
    which is final. `result.overrides` lists the overrides, `result.late` the penalty (raw score kept there)."""
    if not changes and deadline is None:
        return result
    checks = {c.name: c for c in result.checks}
    for change in changes:
        check = checks.get(change["check"])
        if check is not None and change["score"] is not None:
            check.score = min(max(float(change["score"]), 0.0), check.max_score)
    result.score = sum(c.score for c in result.checks)
    if deadline is not None and result.graded:
        from .late import penalty

        at, source, marker = time or (None, "", False)
        verdict = penalty(result.score, at, deadline, result.student)
        note = verdict.note + (f" ({source})" if source else "")
        if marker and at is None:
            note = "marked late by the LMS, but no submission time is known: no late penalty applied"
        result.late = {"raw_score": result.score, "penalty": round(verdict.penalty, 6), "note": note,
                       "submitted_at": at.isoformat() if at else None, "due": verdict.due.isoformat()}
        result.score = max(0.0, result.score - verdict.penalty)
    total = next((c for c in changes if c["check"] == "" and c["score"] is not None), None)
    if total is not None:
        result.score = min(max(float(total["score"]), 0.0), result.max_score)
    result.overrides = [dict(c) for c in changes]
    return result
