"""Grading a class through the real CLI: intake layouts, unsafe zips, the gradebook, kill -9 and --resume."""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, SOLUTION
from test_names_are_data import only_our_script



def autograder(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True, text=True,
                          timeout=600, **kwargs)


def make_class(root: Path, n_correct: int = 3) -> Path:
    """Per-student folders (nested layouts), per-student files, an empty folder and a folder with two files."""
    solution = SOLUTION.read_text()
    for i in range(n_correct):
        (root / f"ok{i}" / "deep" / "er").mkdir(parents=True)
        (root / f"ok{i}" / "deep" / "er" / "attention.py").write_text(solution)
    (root / "no_scale.py").write_text(solution.replace("/ math.sqrt(d_head)", ""))
    (root / "empty").mkdir()
    (root / "empty" / "notes.txt").write_text("I could not finish")
    (root / "two").mkdir()  # both forms, neither the released stub: the module form is graded (engine.resolve)
    (root / "two" / "attention.py").write_text(solution)
    (root / "two" / "attention.ipynb").write_text("{}")
    return root


def read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_class_folder_outputs_and_ungradable_reasons(tmp_path):
    out = tmp_path / "out"
    result = autograder("grade", make_class(tmp_path / "class"), "--out", out, "-q")
    assert result.returncode == 0, result.stderr
    rows = {r["student"]: r for r in read_csv(out / "grades.csv")}
    assert list(rows) == sorted(rows) == ["empty", "no_scale", "ok0", "ok1", "ok2", "two"]
    header = (out / "grades.csv").read_text().splitlines()[0].split(",")
    assert header[:3] == ["student", "score", "max_score"] and "sdpa_scaling" in header
    assert rows["ok0"]["score"] == "20" and rows["empty"]["score"] == "0"
    # `two` holds attention.py and an (invalid) attention.ipynb, no manifest, and neither is byte-identical to the
    # released stub: both changed, so the resolver takes the module form (one rule for grade, check and Gradescope)
    # instead of refusing the folder ("2 candidate files" gave 0 to students who uploaded the whole folder)
    assert rows["two"]["score"] == "20"
    assert 0 < float(rows["no_scale"]["score"]) < 20 and rows["no_scale"]["sdpa_scaling"] == "0"
    report = (out / "report.html").read_text()
    assert "no attention.py or attention.ipynb found" in report and "notes.txt" in report  # says what it found
    assert "data:image/png;base64," in report and "no_scale" in report
    feedback = (out / "feedback" / "no_scale.md").read_text()
    assert "√d_head" in feedback and "sqrt(d_head)" in feedback  # the diagnosis, in both languages
    assert (out / "feedback" / "no_scale.html").read_text().startswith("<!doctype html>")
    assert '"tests"' in (out / "results" / "ok1.json").read_text()
    run = json.loads((out / "run.json").read_text())
    assert run["graded"] == 5 and 0 < run["worker_peak_bytes"] < run["worker_cap_bytes"]  # ok0-2, no_scale, two


def test_zip_with_parent_entries_or_symlinks_is_refused(tmp_path):
    for name, add in {
        "traversal": lambda z: z.writestr("../../evil.py", "x = 1"),
        "symlink": lambda z: z.writestr(_symlink_info("alice/attention.py"), "/etc/passwd"),
        "absolute": lambda z: z.writestr("/tmp/abs.py", "x = 1"),
    }.items():
        archive = tmp_path / f"{name}.zip"
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("bob/attention.py", SOLUTION.read_text())
            add(z)
        result = autograder("grade", archive, "--out", tmp_path / f"out-{name}", "-q")
        assert result.returncode == 2 and "refusing" in result.stderr, (name, result.stderr)
        assert not (tmp_path / "evil.py").exists() and not (tmp_path / f"out-{name}" / "grades.csv").exists()


def _symlink_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def test_lms_zip_and_nbgrader_layout(tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("submissions/carol.py", SOLUTION.read_text())
        z.writestr("submissions/dave/attention.py", SOLUTION.read_text())
    assert autograder("grade", archive, "--out", tmp_path / "a", "-q").returncode == 0
    assert [r["student"] for r in read_csv(tmp_path / "a" / "grades.csv")] == ["carol", "dave"]

    course = tmp_path / "course"
    (course / "submitted" / "erin" / "attention").mkdir(parents=True)
    shutil.copy(SOLUTION, course / "submitted" / "erin" / "attention" / "attention.py")
    (course / "nbgrader_config.py").write_text("")  # an nbgrader course root, not a student named "submitted"
    assert autograder("grade", course, "--out", tmp_path / "b", "-q").returncode == 0
    assert read_csv(tmp_path / "b" / "grades.csv")[0]["student"] == "erin"


def test_existing_gradebook_needs_resume_or_force(tmp_path):
    cls = make_class(tmp_path / "class", n_correct=1)
    out = tmp_path / "out"
    assert autograder("grade", cls, "--out", out, "-q").returncode == 0
    again = autograder("grade", cls, "--out", out, "-q")
    assert again.returncode == 2 and "--resume" in again.stderr
    (cls / "no_scale.py").write_text(SOLUTION.read_text())  # the student fixed it
    resumed = autograder("grade", cls, "--out", out, "--resume")
    assert resumed.returncode == 0 and "graded 1, kept 2 unchanged" in resumed.stdout  # ok0 and two kept
    assert {r["student"]: r["score"] for r in read_csv(out / "grades.csv")}["no_scale"] == "20"
    forced = autograder("grade", cls, "--out", out, "--force")
    assert "graded 3, kept 0" in forced.stdout


def test_kill_9_then_resume_gives_the_same_grades(tmp_path):
    cls = tmp_path / "class"
    cls.mkdir()
    solution = SOLUTION.read_text()
    for i in range(24):
        (cls / f"s{i:02d}").mkdir()
        (cls / f"s{i:02d}" / "attention.py").write_text(solution if i % 4 else solution.replace("dim=-1", "dim=-2"))
    reference = tmp_path / "uninterrupted"
    same_inputs = {**os.environ, "AUTOGRADER_COURSE_SECRET": "kill-9-test"}  # both runs draw the same hidden inputs
    assert autograder("grade", cls, "--out", reference, "-q", "-j", "1", env=same_inputs).returncode == 0

    out = tmp_path / "interrupted"
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(cls), "--out", str(out), "-q", "-j", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=same_inputs)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _rows(out) < 5:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    saved = _rows(out)
    assert 5 <= saved < 24, saved
    assert not (out / "grades.csv").exists()

    resumed = autograder("grade", cls, "--out", out, "--resume", "-j", "1", env=same_inputs)
    assert resumed.returncode == 0, resumed.stderr
    assert f"graded {24 - saved}, kept {saved} unchanged" in resumed.stdout
    assert (out / "grades.csv").read_bytes() == (reference / "grades.csv").read_bytes()


def _rows(out: Path) -> int:
    try:
        with sqlite3.connect(out / "gradebook.sqlite", timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_student_text_cannot_inject_html_into_feedback_or_report(tmp_path):
    """Student ids, exception messages and printed output are the students' words: the HTML escapes them, and
    printed backticks cannot close the Markdown code fence."""
    cls = tmp_path / "class"
    cls.mkdir()
    payload = "<script>alert('pwned')</script>"
    solution = SOLUTION.read_text()
    (cls / "printer.py").write_text(solution + f"\nprint({'```' + chr(10) + payload + chr(10) + '```'!r})\n")
    (cls / "raiser.py").write_text(solution + f"\n\ndef split_heads(x, num_heads):\n    raise ValueError({payload!r})\n")
    (cls / "<img src=x onerror=alert(1)>.py").write_text(solution)
    out = tmp_path / "out"
    result = autograder("grade", cls, "--out", out, "-q", "--assignment", "attention")  # loose files: no name to go by
    assert result.returncode == 0, result.stderr
    html = [out / "report.html", *(out / "feedback").glob("*.html")]
    assert len(html) == 4
    for page in html:
        text = page.read_text()
        assert "<script>alert" not in text and "<img src=x" not in text, page.name
        if page.name == "report.html":
            only_our_script(text)  # its sort script, allowed by its hash; nothing else could run
        else:
            assert "<script" not in text, page.name  # feedback pages have no script at all
    assert "&lt;img src=x onerror=alert(1)&gt;" in (out / "report.html").read_text()
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in (out / "feedback" / "raiser.html").read_text()
    md = (out / "feedback" / "printer.md").read_text()
    assert "````text\n```\n<script>" in md  # the fence is longer than the backticks the student printed


def test_the_run_always_ends_with_grades_whatever_the_students_do(tmp_path):
    """A trickling reply, a file CPython cannot compile and an infinite loop, beside correct students: the run ends
    with every row written; the timed-out student was graded again alone before its timeout counted."""
    from fixtures.compose import FIXTURES, base_solution_source, submission_bytes

    root = tmp_path / "class"
    for name in ("slow_drip_reply", "deep_unary_minus", "infinite_loop_in_sdpa"):
        (root / name).mkdir(parents=True)
        (root / name / "attention.py").write_bytes(submission_bytes(FIXTURES / "attention" / "hostile" / f"{name}.py",
                                                                    base_solution_source()))
    for i in range(2):
        (root / f"ok{i}").mkdir()
        shutil.copy(SOLUTION, root / f"ok{i}" / "attention.py")
    out = tmp_path / "out"
    result = autograder("grade", root, "--out", out, "-q", "--jobs", "2", "--timeout", "40", "--call-timeout", "2")
    assert result.returncode == 0, result.stderr
    rows = {r["student"]: r for r in read_csv(out / "grades.csv")}
    assert {k: rows[k]["score"] for k in rows} == {"deep_unary_minus": "0", "infinite_loop_in_sdpa": "7",
                                                   "ok0": "20", "ok1": "20", "slow_drip_reply": "7"}
    run = json.loads((out / "run.json").read_text())
    assert run["regraded_alone"] == 2  # the two that timed out


def test_everything_stored_or_written_per_student_is_bounded(tmp_path):
    """Replies flooded with megabyte strings, exceptions with 3 MB messages, 100 kB of prints: each student's
    feedback, results file and gradebook row stay small, and so does the report."""
    from fixtures.compose import FIXTURES, base_solution_source, submission_bytes

    root = tmp_path / "class"
    for name in ("reply_flood", "exception_leak", "stdout_flood", "expanded_output_bomb"):
        (root / name).mkdir(parents=True)
        (root / name / "attention.py").write_bytes(submission_bytes(FIXTURES / "attention" / "hostile" / f"{name}.py",
                                                                    base_solution_source()))
    out = tmp_path / "out"
    result = autograder("grade", root, "--out", out, "-q", "--jobs", "2")
    assert result.returncode == 0, result.stderr
    for path in [*(out / "feedback").iterdir(), *(out / "results").iterdir()]:
        assert path.stat().st_size < 64 << 10, path
    rows = sqlite3.connect(out / "gradebook.sqlite").execute("SELECT student, length(result) FROM results").fetchall()
    assert len(rows) == 4 and all(size < 128 << 10 for _, size in rows), rows
    assert (out / "report.html").stat().st_size < 1 << 20


def test_results_are_regraded_when_score_bearing_sandbox_code_changes(tmp_path, monkeypatch):
    """The fingerprint of stored results covers the sandbox too (the forbidden-API block and the worker decide what
    comes back), not only the engine and the assignment."""
    from autograder.classroom import grade_class
    from autograder.engine.checks import load_suite

    copy = tmp_path / "autograder"
    for part in ("engine", "sandbox", "assignments/attention"):
        shutil.copytree(grade_class.PACKAGE / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(grade_class, "PACKAGE", copy)
    suite = load_suite("attention")
    before = grade_class.suite_fingerprint(suite)
    with open(copy / "sandbox" / "forbid.py", "a") as f:
        f.write("\n# a change to the forbidden-API block\n")
    assert grade_class.suite_fingerprint(suite) != before


@pytest.mark.parametrize("error", [MemoryError, RecursionError, KeyError, AttributeError])
def test_a_grader_side_exception_becomes_that_students_row(error, grade, monkeypatch):
    from autograder.engine import runner

    def broken(*args, **kwargs):
        raise error("boom")

    monkeypatch.setattr(runner.forbidden_scan, "scan", broken)
    result = grade(SOLUTION)
    assert result.score == 0 and "internal grader error" in result.error_en and error.__name__ in result.error_en
    monkeypatch.undo()
    assert grade(SOLUTION).score == 20


def test_a_regrade_reports_whose_score_changed_and_which_checks_flipped(tmp_path):
    from autograder.classroom.gradebook import Gradebook

    cls = make_class(tmp_path / "class", n_correct=1)
    out = tmp_path / "out"
    assert autograder("grade", cls, "--out", out, "-q").returncode == 0
    assert "regrade" not in json.loads((out / "run.json").read_text())  # a first run changes nothing
    (cls / "no_scale.py").write_text(SOLUTION.read_text())  # the student fixed it
    resumed = autograder("grade", cls, "--out", out, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "since the last run: 1 score(s) changed" in resumed.stdout and "sdpa_scaling failed→passed" in resumed.stdout
    changed = json.loads((out / "run.json").read_text())["regrade"]["changed"]
    assert [c["student"] for c in changed] == ["no_scale"] and changed[0]["after"] == 20 > changed[0]["before"]
    assert ["sdpa_scaling", "failed", "passed"] in changed[0]["flipped"]
    forced = autograder("grade", cls, "--out", out, "--force")
    assert "since the last run: 0 score(s) changed" in forced.stdout
    book = Gradebook(out / "gradebook.sqlite")
    try:
        runs = book.history("attention", "no_scale")
    finally:
        book.close()
    assert [score for _, score, _ in runs][0] < 20 and [score for _, score, _ in runs][1:] == [20, 20]


def test_an_override_survives_a_regrade_and_shows_in_feedback_report_and_export(tmp_path):
    cls = make_class(tmp_path / "class", n_correct=1)
    out = tmp_path / "out"
    assert autograder("grade", cls, "--out", out, "-q").returncode == 0
    before = {r["student"]: float(r["score"]) for r in read_csv(out / "grades.csv")}["no_scale"]
    made = autograder("override", out, "--student", "no_scale", "--check", "sdpa_scaling", "--score", "1",
                      "--why", "scaling explained in office hours", "--by", "TA Chen")
    assert made.returncode == 0, made.stderr
    after = {r["student"]: r for r in read_csv(out / "grades.csv")}["no_scale"]
    assert float(after["score"]) == before + 1 and after["sdpa_scaling"] == "1"
    feedback = (out / "feedback" / "no_scale.md").read_text(encoding="utf-8")
    assert "TA Chen" in feedback and "scaling explained in office hours" in feedback and "人工调整" in feedback
    assert "人工调整 / override" in (out / "report.html").read_text(encoding="utf-8")
    assert "TA Chen" in (out / "results" / "no_scale.json").read_text(encoding="utf-8")
    assert autograder("grade", cls, "--out", out, "--force", "-q").returncode == 0  # a regrade keeps it
    assert {r["student"]: float(r["score"]) for r in read_csv(out / "grades.csv")}["no_scale"] == before + 1
    total = autograder("override", out, "--student", "ok0", "--score", "15", "--why", "late", "--by", "Prof. Li")
    assert total.returncode == 0 and {r["student"]: float(r["score"]) for r in read_csv(out / "grades.csv")}["ok0"] == 15
    wrong = autograder("override", out, "--student", "nobody", "--score", "1", "--why", "x", "--by", "y")
    assert wrong.returncode == 2 and "no student 'nobody'" in wrong.stderr
    removed = autograder("override", out, "--student", "ok0", "--remove", "--why", "-", "--by", "Prof. Li")
    assert removed.returncode == 0 and {r["student"]: float(r["score"]) for r in read_csv(out / "grades.csv")}["ok0"] == 20
