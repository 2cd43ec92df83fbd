"""LMS exports checked against the importers' own rules (Canvas gradebook import, Moodle grade import from CSV,
Blackboard Grade Center upload), not against our writer: every roster student has a row a real importer can match,
scores are numbers within the points possible, no cell is a formula."""
from __future__ import annotations

import csv
import io
import re
import subprocess
import sys

import pytest

from conftest import ROOT

from autograder.classroom.export import ExportError, export
from autograder.classroom.gradebook import Gradebook
from autograder.classroom.roster import load_roster
from autograder.engine.checks import load_suite
from autograder.engine.results import SubmissionResult

ROSTER = """id,name,email,section,canvas_id,sis_user_id,sis_login_id,moodle_username
s1,Li Wei,liwei@example.edu,A,1001,SIS1,liwei,liwei
s2,王芳,wangfang@example.edu,A,1002,SIS2,wangfang,wangfang
s3,=HYPERLINK("x"),evil@example.edu,B,1003,,evil,evil
"""
SCORES = {"s1": 20.0, "s2": 12.5}  # s3 submitted nothing; "stranger" is not on the roster


def results() -> list[SubmissionResult]:
    graded = [SubmissionResult(s, "attention", "attention.py", None, score, 20.0) for s, score in SCORES.items()]
    return graded + [SubmissionResult("stranger", "attention", "attention.py", None, 20.0, 20.0)]


@pytest.fixture
def roster(tmp_path):
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    return load_roster(tmp_path / "roster.csv")


def rows(text: str) -> list[list[str]]:
    assert "\n" not in text.replace("\r\n", "")  # CRLF records only
    return list(csv.reader(io.StringIO(text)))


def no_formulas(table: list[list[str]]) -> None:
    assert not [cell for row in table for cell in row if cell[:1] in ("=", "+", "@") or cell.startswith("-") and
                not re.fullmatch(r"-?\d+(\.\d+)?", cell)]


def test_canvas_import_rules(roster):
    made = export("canvas", results(), roster, "Attention", 20, lms_id="55501")
    table = rows(made.text)
    assert table[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert re.fullmatch(r".+ \(\d+\)", table[0][5]) and table[0][5] == "Attention (55501)"
    assert table[1][0] == "Points Possible" and float(table[1][5]) == 20
    body = table[2:]
    assert len(body) == 3 and all(any(row[1:4]) for row in body)  # Canvas matches by ID, SIS User ID, SIS Login ID
    assert all(0 <= float(row[5]) <= 20 for row in body)
    assert {row[1]: float(row[5]) for row in body} == {"1001": 20, "1002": 12.5, "1003": 0}
    no_formulas(table)
    assert made.left_out == ["stranger"]


def test_canvas_refuses_a_student_it_could_not_match(tmp_path):
    (tmp_path / "r.csv").write_text("id,name\ns1,Li Wei\n", encoding="utf-8")
    with pytest.raises(ExportError, match="s1"):
        export("canvas", results(), load_roster(tmp_path / "r.csv"), "Attention", 20)


def test_moodle_import_rules(roster):
    table = rows(export("moodle", results(), roster, "Attention", 20).text)
    assert table[0] == ["Username", "Attention", "Feedback"]  # one identifier column, a grade, a feedback column
    identifiers = [row[0] for row in table[1:]]
    assert len(identifiers) == len(set(identifiers)) == 3 and all(identifiers)
    assert all(re.fullmatch(r"\d+(\.\d+)?", row[1]) for row in table[1:])
    assert dict((row[0], row[2]) for row in table[1:])["evil"] == "未提交 / no submission"
    no_formulas(table)


def test_blackboard_upload_rules(roster):
    table = rows(export("blackboard", results(), roster, "Attention", 20, lms_id="_123_1").text)
    assert table[0][0] == "Username" and re.fullmatch(r".+ \[Total Pts: \d+(\.\d+)? Score\] \|\S+", table[0][1])
    usernames = [row[0] for row in table[1:]]
    assert usernames == ["liwei", "wangfang", "evil"]
    assert [float(row[1]) for row in table[1:]] == [20, 12.5, 0]


def test_export_command_reads_the_gradebook(tmp_path, roster):
    out = tmp_path / "out"
    out.mkdir()
    book = Gradebook(out / "gradebook.sqlite")
    suite = load_suite("attention")
    for r in results():
        book.save(r, "fingerprint")
    book.close()
    run = subprocess.run([sys.executable, "-m", "autograder", "export", str(out), "--to", "canvas", "--roster",
                          str(tmp_path / "roster.csv"), "--title", "Attention", "--lms-id", "55501"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "not on the roster, left out (1): stranger" in run.stdout
    table = rows((out / "export-canvas.csv").read_bytes().decode("utf-8"))
    assert table[0][5] == "Attention (55501)" and float(table[1][5]) == suite.max_score
    bad = subprocess.run([sys.executable, "-m", "autograder", "export", str(tmp_path / "nowhere"), "--to", "moodle",
                          "--roster", str(tmp_path / "roster.csv")], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert bad.returncode == 2 and "grade the class" in bad.stderr
