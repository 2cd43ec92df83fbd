"""A class as an LMS delivers it: zip names in the encodings real zips use, a roster the submissions are matched to
(Canvas, Moodle and Blackboard download names, ids, names), a row for every student without a submission, unknown
submitters listed, and clear errors for a bad roster or an empty class."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT, SOLUTION

from autograder.classroom.intake import IntakeError, entry_name, find_submissions
from autograder.classroom.roster import Ambiguous, Match, RosterError, load_roster, parse_name

NAMES = ("attention.py", "attention.ipynb")
ROSTER = """id,name,email,section,canvas_id,sis_user_id,moodle_username
s1001,Li Wei,liwei@example.edu,A,1001,SIS1001,liwei
s1002,王芳,wangfang@example.edu,A,1002,SIS1002,wangfang
s1003,Anna Schmidt,anna@example.edu,B,1003,,anna
s1004,Zhang Wei,zw1@example.edu,B,1004,,
s1005,Zhang Wei,zw2@example.edu,B,1005,,
s1006,Tom Müller,tom@example.edu,B,1006,,tom
"""


class RawName(zipfile.ZipInfo):
    """An entry written with its name's bytes as they are and the UTF-8 flag (bit 11) clear."""
    __slots__ = ("raw",)

    def _encodeFilenameFlags(self):
        return self.raw, self.flag_bits & ~0x800


def raw_zip(path, members: dict[bytes, str]) -> None:
    """A zip whose entry names are the given raw bytes without the UTF-8 flag, as Windows and old Linux tools
    write them (Python's own writer would set the flag for any non-ASCII name)."""
    with zipfile.ZipFile(path, "w") as z:
        for raw, text in members.items():
            info = RawName(raw.decode("cp437"))
            info.raw = raw
            z.writestr(info, text)


def roster(tmp_path, text=ROSTER):
    (tmp_path / "roster.csv").write_text(text, encoding="utf-8")
    return load_roster(tmp_path / "roster.csv")


def test_zip_names_are_decoded_by_flag_then_utf8_then_gb18030_then_cp437(tmp_path):
    raw_zip(tmp_path / "a.zip", {"王芳/attention.py".encode("gbk"): "x", "李伟/attention.py".encode("utf-8"): "x",
                                 "Müller/attention.py".encode("cp437"): "x", b"plain/attention.py": "x"})
    with zipfile.ZipFile(tmp_path / "a.zip") as z:
        decoded = dict(entry_name(i) for i in z.infolist())
    assert decoded["王芳/attention.py"] == "gb18030 (no UTF-8 flag)"
    assert decoded["李伟/attention.py"] == "utf-8 (no UTF-8 flag)"
    assert decoded["plain/attention.py"] == "ascii"
    assert len(decoded) == 4  # the cp437 name decodes as something: GB18030 pairs or cp437, never an error
    with zipfile.ZipFile(tmp_path / "b.zip", "w") as z:
        z.writestr("陈杰/attention.py", "x")  # Python sets the UTF-8 flag
    with zipfile.ZipFile(tmp_path / "b.zip") as z:
        assert entry_name(z.infolist()[0]) == ("陈杰/attention.py", "utf-8")
    notes = []
    entries = find_submissions(tmp_path / "a.zip", NAMES, tmp_path / "w", notes=notes)
    assert {"王芳", "李伟", "plain"} <= {e.student for e in entries}
    assert any("gb18030" in n and "a.zip" in n for n in notes)


@pytest.mark.parametrize("name, expected", [
    ("weili_LATE_1001_55501_attention", ("canvas", "1001", "id", True)),
    ("liwei_1001_55501_attention", ("canvas", "1001", "id", False)),
    ("王芳_12345_assignsubmission_file_", ("moodle", "王芳", "name", False)),
    ("Attention_anna_attempt_2026-11-20-10-30-00_attention", ("blackboard", "anna", "id", False)),
    ("s1003", ("plain", "s1003", "id", False)),
])
def test_lms_download_names_are_read(name, expected):
    parsed = parse_name(name)
    assert (parsed.lms, parsed.key, parsed.by, parsed.late) == expected


def test_submissions_match_by_lms_id_roster_id_or_name_and_an_ambiguous_name_matches_no_one(tmp_path):
    r = roster(tmp_path)
    assert r.match("weili_LATE_1001_55501_attention") == Match(r.get("s1001"), "canvas_id", True)
    assert r.match("王芳_12345_assignsubmission_file_") == Match(r.get("s1002"), "name")
    assert r.match("Attention_anna_attempt_2026-11-20-10-30-00_attention") == Match(r.get("s1003"), "moodle_username")
    assert r.match("s1006") == Match(r.get("s1006"), "id")
    assert r.match("tom muller") == Match(r.get("s1006"), "name")  # case, space and the umlaut's mark ignored
    assert isinstance(r.match("Zhang Wei_777_assignsubmission_file_"), Ambiguous)
    assert r.match("nobody_999_1_attention") is None


@pytest.mark.parametrize("text, message", [
    ("name,email\nLi,x\n", ":1: the header needs the column(s) id"),
    ("id,name\na,A\nb,B\na,C\n", ":4: id 'a' is already used on line 2"),
    ("id,name,canvas_id\na,A,7\nb,B,7\n", ":3: canvas_id '7' is already used on line 2"),
    ("id,name\n,A\n", ":2: empty id"),
    ("id,name\n", "no students"),
])
def test_a_bad_roster_is_refused_naming_the_line(tmp_path, text, message):
    with pytest.raises(RosterError, match=re.escape(message)):
        roster(tmp_path, text)


def autograder(*args):
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_a_class_zip_with_a_roster_gives_every_student_a_row_and_lists_the_unknown(tmp_path):
    solution = SOLUTION.read_text(encoding="utf-8")
    raw_zip(tmp_path / "moodle.zip", {
        "王芳_12345_assignsubmission_file_/attention.py".encode("gbk"): solution,
        b"Anna Schmidt_12346_assignsubmission_file_/attention.py": solution.replace("dim=-1", "dim=-2"),
        b"Stranger_12347_assignsubmission_file_/attention.py": solution})
    roster(tmp_path)
    out = tmp_path / "out"
    run = autograder("grade", tmp_path / "moodle.zip", "--roster", tmp_path / "roster.csv", "--out", out)
    assert run.returncode == 0, run.stderr
    rows = {r["student"]: float(r["score"]) for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert rows["s1002"] == 20 and 0 < rows["s1003"] < 20
    assert rows["s1001"] == 0 and rows["s1004"] == 0  # no submission: a row with 0, never missing
    assert "Stranger_12347_assignsubmission_file_" in rows  # unknown: graded under its own name, not dropped
    assert "no submission (4)" in run.stdout and "Stranger_12347" in run.stdout and "gb18030" in run.stdout
    facts = json.loads((out / "run.json").read_text(encoding="utf-8"))["roster"]
    assert facts["unknown"] == ["Stranger_12347_assignsubmission_file_"]
    assert sorted(facts["no_submission"]) == ["s1001", "s1004", "s1005", "s1006"]
    feedback = (out / "feedback" / "s1001.md").read_text(encoding="utf-8")
    assert "未提交" in feedback and "no submission" in feedback
    report = (out / "report.html").read_text(encoding="utf-8")
    assert 'href="feedback/s1002.html"' in report and "未提交 / no submission" in report
    assert "ungraded count as 0" in report and "of graded submissions" in report


def test_two_submissions_for_one_student_are_an_error_naming_both(tmp_path):
    (tmp_path / "cls" / "s1001").mkdir(parents=True)
    (tmp_path / "cls" / "s1001" / "attention.py").write_text("x = 1\n")
    (tmp_path / "cls" / "liwei_1001_5_attention.py").write_text("x = 1\n")
    roster(tmp_path)
    run = autograder("grade", tmp_path / "cls", "--roster", tmp_path / "roster.csv", "--assignment", "attention",
                     "--out", tmp_path / "out")
    assert run.returncode == 2 and "s1001" in run.stderr and "liwei_1001_5_attention" in run.stderr


def test_an_empty_class_folder_is_an_error_and_stray_files_are_noted(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("nothing here")
    run = autograder("grade", tmp_path / "empty", "--assignment", "attention", "--out", tmp_path / "out")
    assert run.returncode == 2 and "no submissions found" in run.stderr and "readme.txt" in run.stderr
    with pytest.raises(IntakeError):
        find_submissions(tmp_path / "empty", NAMES, tmp_path / "w")
    (tmp_path / "cls" / "alice").mkdir(parents=True)
    (tmp_path / "cls" / "alice" / "attention.py").write_text("x = 1\n")
    (tmp_path / "cls" / "helper.py").write_text("x = 1\n")
    (tmp_path / "cls" / "notes.txt").write_text("x")
    notes = []
    find_submissions(tmp_path / "cls", NAMES, tmp_path / "w", notes=notes)
    assert any("helper.py" in n and "beside the student folders" in n for n in notes)
    assert any("notes.txt" in n for n in notes)


def test_a_bad_roster_stops_the_run_before_grading(tmp_path):
    (tmp_path / "cls" / "alice").mkdir(parents=True)
    (tmp_path / "cls" / "alice" / "attention.py").write_text("x = 1\n")
    (tmp_path / "roster.csv").write_text("id,name\na,A\na,B\n", encoding="utf-8")
    run = autograder("grade", tmp_path / "cls", "--roster", tmp_path / "roster.csv", "--out", tmp_path / "out")
    assert run.returncode == 2 and "roster.csv:3" in run.stderr and not (tmp_path / "out").exists()
