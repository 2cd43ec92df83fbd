"""Deadlines and late policy as data (course.toml): every policy's penalty, extensions, times from the places a
download carries them, and a moved due date that changes penalties without regrading."""
from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from conftest import ROOT, SOLUTION

from autograder.classroom.late import CourseError, Deadline, load_course, penalty
from autograder.classroom.times import TimestampError, parse_time, read_timestamps

CN = timezone(timedelta(hours=8))
DUE = datetime(2026, 11, 20, 23, 59, tzinfo=CN)


def at(hours: float) -> datetime:
    return DUE + timedelta(hours=hours)


@pytest.mark.parametrize("policy, hours, expected", [
    (dict(policy="none"), 30, 0),
    (dict(policy="percent_per_day", percent=10, cap=50), -1, 0),
    (dict(policy="percent_per_day", percent=10, cap=50), 0.5, 2),      # a started day counts: 10 % of 20
    (dict(policy="percent_per_day", percent=10, cap=50), 25, 4),
    (dict(policy="percent_per_day", percent=10, cap=50), 24 * 9, 10),  # capped at 50 %
    (dict(policy="percent_per_hour", percent=1, cap=100), 3.2, 0.8),
    (dict(policy="grace_days", grace_days=2, percent=25), 47, 0),
    (dict(policy="grace_days", grace_days=2, percent=25), 49, 5),
])
def test_each_policy_takes_its_penalty(policy, hours, expected):
    verdict = penalty(20.0, at(hours), Deadline(DUE, **policy), "s1")
    assert verdict.penalty == pytest.approx(expected)


def test_a_credit_timeline_and_an_extension_that_moves_it():
    steps = ((DUE - timedelta(days=2), 110.0), (DUE, 100.0), (DUE + timedelta(days=7), 80.0))
    deadline = Deadline(DUE, "timeline", timeline=steps, extensions={"s2": DUE + timedelta(days=2)})
    assert penalty(20.0, at(-72), deadline, "s1").penalty == pytest.approx(-2)   # early: 110 %
    assert penalty(20.0, at(1), deadline, "s1").penalty == pytest.approx(4)      # 80 %
    assert penalty(20.0, at(24 * 8), deadline, "s1").penalty == pytest.approx(20)  # after the last step: 0 %
    assert penalty(20.0, at(24), deadline, "s2").penalty == pytest.approx(0)     # the extension moves the timeline


def test_an_unknown_submission_time_is_never_penalised():
    verdict = penalty(20.0, None, Deadline(DUE, "percent_per_day", percent=10), "s1")
    assert verdict.penalty == 0 and "no submission time" in verdict.note


@pytest.mark.parametrize("text, message", [
    ("[attention]\npolicy = 'none'\n", "needs a `due` date"),
    ("[attention]\ndue = 2026-11-20T23:59:00\n", "UTC offset"),
    ("[attention]\ndue = 2026-11-20T23:59:00+08:00\npolicy = 'sometimes'\n", "is not one of"),
    ("[attention]\ndue = 2026-11-20T23:59:00+08:00\npolicy = 'timeline'\n", "needs a `timeline`"),
    ("[attention]\ndue = 2026-11-20T23:59:00+08:00\n[attention.extensions]\ns1 = 2026-11-22\n", "extensions.s1"),
])
def test_a_bad_course_file_is_refused_naming_the_key(tmp_path, text, message):
    (tmp_path / "course.toml").write_text(text)
    with pytest.raises(CourseError, match=message):
        load_course(tmp_path / "course.toml")


def test_times_are_read_from_iso_nbgrader_and_blackboard_forms(tmp_path):
    assert parse_time("2026-11-20T23:10:00+08:00") == datetime(2026, 11, 20, 23, 10, tzinfo=CN)
    assert parse_time("2026-11-20 15:10:00.500000 UTC") == datetime(2026, 11, 20, 15, 10, 0, 500000, timezone.utc)
    assert parse_time("2026-11-20-23-10-00", CN) == datetime(2026, 11, 20, 23, 10, tzinfo=CN)
    (tmp_path / "t.csv").write_text("student,submitted_at\ns1,2026-11-21T10:00:00+08:00\ns2,yesterday\n")
    with pytest.raises(TimestampError, match=":3: cannot read the time 'yesterday'"):
        read_timestamps(tmp_path / "t.csv")


def autograder(*args):
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_moving_the_due_date_changes_penalties_without_regrading(tmp_path):
    solution = SOLUTION.read_text(encoding="utf-8")
    cls = tmp_path / "cls"
    for name in ("weili_LATE_1001_1_attention.py", "anna_1003_2_attention.py"):  # Canvas names, one marked LATE
        cls.mkdir(exist_ok=True)
        (cls / name).write_text(solution, encoding="utf-8")
    (cls / "erin").mkdir()  # an nbgrader-style folder with its timestamp.txt
    (cls / "erin" / "attention.py").write_text(solution, encoding="utf-8")
    (cls / "erin" / "timestamp.txt").write_text("2026-11-21 04:00:00.000000 UTC")  # 12:00 in +08:00: 12 h late
    (tmp_path / "times.csv").write_text("student,submitted_at\nanna_1003_2_attention,2026-11-22T00:30:00+08:00\n")
    course = tmp_path / "course.toml"
    course.write_text("[attention]\ndue = 2026-11-20T23:59:00+08:00\npolicy = 'percent_per_day'\npercent = 10\n"
                      "cap = 50\n")
    out = tmp_path / "out"
    run = autograder("grade", cls, "--assignment", "attention", "--course", course, "--timestamps",
                     tmp_path / "times.csv", "--out", out, "-q")
    assert run.returncode == 0, run.stderr
    def grades():
        return {r["student"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    rows = grades()
    assert rows["erin"]["score"] == "18" and rows["erin"]["raw_score"] == "20" and rows["erin"]["late_penalty"] == "2"
    assert rows["anna_1003_2_attention"]["score"] == "16"  # 24.5 h late: two started days
    assert rows["weili_LATE_1001_1_attention"]["score"] == "20"  # marked LATE, no time: reported, not penalised
    feedback = (out / "feedback" / "weili_LATE_1001_1_attention.md").read_text(encoding="utf-8")
    assert "marked late by the LMS" in feedback
    graded_at = sqlite3.connect(out / "gradebook.sqlite").execute("SELECT student, graded_at FROM results").fetchall()
    course.write_text("[attention]\ndue = 2026-11-22T23:59:00+08:00\npolicy = 'percent_per_day'\npercent = 10\n"
                      "cap = 50\n[attention.extensions]\nerin = 2026-11-19T23:59:00+08:00\n")
    moved = autograder("late", out, "--course", course)
    assert moved.returncode == 0, moved.stderr
    rows = grades()
    assert rows["anna_1003_2_attention"]["score"] == "20" and rows["erin"]["late_penalty"] == "4"  # 36 h late
    assert sqlite3.connect(out / "gradebook.sqlite").execute(
        "SELECT student, graded_at FROM results").fetchall() == graded_at  # nothing was regraded
    assert "迟交 / late −4" in (out / "report.html").read_text(encoding="utf-8")
    assert json.loads((out / "results" / "erin.json").read_text(encoding="utf-8"))["score"] == 16
