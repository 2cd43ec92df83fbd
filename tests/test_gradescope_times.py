"""Submission times from Gradescope: the "Export Submissions" zip's `submission_metadata.yml` (times and submitters of
each `submission_<id>/` folder, mapped to the roster by sid, then email) for the class grader, and the autograder's
`/autograder/submission_metadata.json` (a late note only: Gradescope applies its own late penalty)."""
from __future__ import annotations

import csv
import json
import io
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import ROOT, SOLUTION

from autograder.classroom.intake import IntakeError, find_submissions, gradescope_submitters
from autograder.classroom.roster import load_roster
from autograder.classroom.times import GRADESCOPE_SOURCE, TimestampError, read_gradescope_metadata, with_times

NAMES = ("attention.py", "attention.ipynb")
BEIJING = timezone(timedelta(hours=8))


def ruby_time(at: datetime) -> str:
    """A time as Gradescope's Rails export writes it (Psych): `2026-11-20 07:10:00.123456789 -08:00`."""
    offset = at.strftime("%z")
    return at.strftime("%Y-%m-%d %H:%M:%S.%f") + f"000 {offset[:3]}:{offset[3:]}"


def metadata_yml(submissions: dict[str, dict]) -> str:
    """Gradescope's submission_metadata.yml for `submissions` (folder -> {submitters: [(name, email, sid)],
    created_at: datetime | str}), in the form Gradescope writes it: Ruby symbol keys, quoted sids, the score,
    status and results of its own autograder, a Ruby object tag."""
    lines = ["---"]
    for folder, sub in submissions.items():
        lines.append(f"{folder}:")
        lines.append("  :submitters:")
        for name, email, sid in sub["submitters"]:
            lines.append(f"  - :name: {name}")
            lines.append(f"    :sid: {sid!r}" if sid is not None else "    :sid: ")
            lines.append(f"    :email: {email}")
        at = sub["created_at"]
        lines.append(f"  :created_at: {ruby_time(at) if isinstance(at, datetime) else at}")
        lines.append("  :score: !ruby/object:BigDecimal 18:0.2e2")
        lines.append("  :status: processed")
        lines.append("  :results:")
        lines.append("    score: 20.0")
        lines.append("    tests:")
        lines.append("    - name: mask_dtype_shape")
        lines.append("      output: \"<script>alert(1)</script>\"")
    return "\n".join(lines) + "\n"


DUE = datetime(2026, 11, 20, 23, 59, tzinfo=BEIJING)
PACIFIC = timezone(timedelta(hours=-8))
SUBMISSIONS = {
    "submission_301": {"submitters": [("Li Wei", "s2601@example.edu", "s2601")],          # on time, by sid
                       "created_at": datetime(2026, 11, 20, 7, 10, tzinfo=PACIFIC)},        # = 23:10 +08:00
    "submission_302": {"submitters": [("Anna Schmidt", "S2602@Example.edu", None)],       # by email, 35 h late
                       "created_at": datetime(2026, 11, 22, 10, 59, tzinfo=BEIJING)},
    "submission_303": {"submitters": [("Yang Lin", "ylin@other.edu", "SIS2603"),           # a group: SIS id,
                                      ("James Okafor", "x@y", "1004")],                    # Canvas id
                       "created_at": datetime(2026, 11, 21, 0, 30, tzinfo=BEIJING)},       # 31 min late
    "submission_304": {"submitters": [("Visitor X", "visitor@else.where", "v999")],        # not on the roster
                       "created_at": "2026-11-19 12:00:00 +08:00"},
}


def write_export(folder: Path, submissions=SUBMISSIONS, yml: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in submissions:
        (folder / name).mkdir()
        (folder / name / "attention.py").write_text(SOLUTION.read_text())
    (folder / "submission_metadata.yml").write_text(metadata_yml(submissions) if yml is None else yml)
    return folder


ROSTER = ROOT / "examples" / "course" / "roster.csv"


def test_the_metadata_gives_each_folder_its_time_and_submitters(tmp_path):
    path = write_export(tmp_path / "export") / "submission_metadata.yml"
    found, problems = read_gradescope_metadata(path, BEIJING)
    assert problems == []
    assert set(found) == set(SUBMISSIONS)
    assert found["submission_301"].created_at == datetime(2026, 11, 20, 23, 10, tzinfo=BEIJING)
    assert found["submission_301"].created_at.utcoffset() == timedelta(hours=-8)  # kept as Gradescope wrote it
    assert found["submission_302"].submitters == (("Anna Schmidt", "S2602@Example.edu", ""),)  # blank sid: ""
    assert [s[2] for s in found["submission_303"].submitters] == ["SIS2603", "1004"]
    assert found["submission_304"].created_at == datetime(2026, 11, 19, 12, tzinfo=BEIJING)
    assert found["submission_301"].line == 2


def test_a_pyyaml_written_file_with_plain_keys_reads_the_same(tmp_path):
    import yaml

    path = tmp_path / "submission_metadata.yml"
    path.write_text(yaml.safe_dump({"submission_1": {"submitters": [{"name": "王芳", "sid": 2619, "email": None}],
                                                     "created_at": "2026-11-20T23:10:00+08:00"}},
                                   allow_unicode=True))
    found, problems = read_gradescope_metadata(path)
    assert problems == [] and found["submission_1"].submitters == (("王芳", "", "2619"),)
    assert found["submission_1"].created_at == datetime(2026, 11, 20, 23, 10, tzinfo=BEIJING)


def test_intake_reads_the_times_and_the_roster_gets_the_submitters(tmp_path):
    notes: list[str] = []
    entries = find_submissions(write_export(tmp_path / "export"), NAMES, tmp_path / "work", notes=notes, tz=BEIJING)
    assert [e.student for e in entries] == list(SUBMISSIONS)  # the metadata is no submission, and not "ignored"
    assert not any("ignored" in n for n in notes) and any("4 of 4 submissions" in n for n in notes)
    assert all(e.time_source == GRADESCOPE_SOURCE and e.submitted_at for e in entries)
    entries = with_times(entries, None, BEIJING)  # nothing else overrides Gradescope's time
    assert entries[1].submitted_at == datetime(2026, 11, 22, 10, 59, tzinfo=BEIJING)
    named = {e.student: e for e in gradescope_submitters(entries, load_roster(ROSTER), notes)}
    # by sid (the roster id), email (case-insensitive), SIS User ID, Canvas ID; unknown: under the name
    assert set(named) == {"s2601", "s2602", "s2603", "s2604", "Visitor X"}
    assert named["s2603"].path == named["s2604"].path and named["s2604"].submitted_at == named["s2603"].submitted_at
    assert any("group submissions" in n and "submission_303" in n for n in notes)
    plain = {e.student for e in gradescope_submitters(entries)}  # no roster: sid, else email
    assert plain == {"s2601", "S2602@Example.edu", "SIS2603", "1004", "v999"}


def test_a_timestamps_csv_still_wins(tmp_path):
    entries = find_submissions(write_export(tmp_path / "export"), NAMES, tmp_path / "work", tz=BEIJING)
    fixed = datetime(2026, 11, 20, 12, tzinfo=BEIJING)
    entries = with_times(entries, {"submission_302": fixed}, BEIJING)
    assert entries[1].submitted_at == fixed and entries[1].time_source == "timestamps CSV"


@pytest.mark.parametrize("yml, where", [
    ("submission_1:\n  :submitters: [\n  :created_at: 2026\n", "submission_metadata.yml:3"),   # unclosed flow list
    ("submission_1:\n\t:created_at: x\n", "submission_metadata.yml:2"),                      # a tab indent
    ("- just\n- a list\n", "submission_metadata.yml:1"),                                     # not a mapping
    ("\xff\xfe garbage", "submission_metadata.yml"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "submission_metadata.yml"),                     # absurdly deep
])
def test_a_broken_metadata_file_is_a_clear_error_naming_it(tmp_path, yml, where):
    folder = write_export(tmp_path / "export", {"submission_1": SUBMISSIONS["submission_301"]}, yml="")
    (folder / "submission_metadata.yml").write_bytes(yml.encode("latin-1") if yml.startswith("\xff") else yml.encode())
    with pytest.raises(IntakeError) as e:
        find_submissions(folder, NAMES, tmp_path / "work")
    assert where in str(e.value)


def test_an_unreadable_time_is_reported_with_its_line_and_never_penalised(tmp_path):
    subs = {"submission_1": {**SUBMISSIONS["submission_301"], "created_at": "next tuesday"},
            "submission_2": SUBMISSIONS["submission_302"]}
    folder = write_export(tmp_path / "export", subs)
    (folder / "submission_3").mkdir()  # a folder the metadata does not list
    (folder / "submission_3" / "attention.py").write_text("x = 1\n")
    notes: list[str] = []
    entries = {e.student: e for e in find_submissions(folder, NAMES, tmp_path / "work", notes=notes)}
    assert entries["submission_1"].submitted_at is None and entries["submission_2"].submitted_at is not None
    assert any("submission_metadata.yml:" in n and "'next tuesday'" in n and "submission_1" in n for n in notes)
    assert any("does not list submission_3" in n for n in notes)
    assert entries["submission_3"].time_source == ""


def test_two_folders_of_one_student_are_an_error_naming_both(tmp_path):
    subs = {"submission_1": SUBMISSIONS["submission_301"], "submission_2": SUBMISSIONS["submission_301"]}
    entries = find_submissions(write_export(tmp_path / "export", subs), NAMES, tmp_path / "work")
    with pytest.raises(IntakeError, match="submission_1 and submission_2"):
        gradescope_submitters(entries, load_roster(ROSTER))


def test_aliases_are_not_expanded(tmp_path):
    """A billion-laughs file is composed, not built: reading it is quick and it is just not a submission list."""
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(20))
    path = tmp_path / "submission_metadata.yml"
    path.write_text(bomb)
    found, problems = read_gradescope_metadata(path)
    assert found == {} and len(problems) == 21


def test_missing_metadata_file_is_a_timestamp_error(tmp_path):
    with pytest.raises(TimestampError, match="cannot read"):
        read_gradescope_metadata(tmp_path / "nope.yml")


def autograder(*args):
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def test_a_gradescope_export_zip_is_graded_with_its_times_and_the_late_policy(tmp_path):
    export = write_export(tmp_path / "assignment_5501_export")
    archive = tmp_path / "gradescope_export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(export.rglob("*")):
            zf.write(path, path.relative_to(tmp_path).as_posix())
    course = tmp_path / "course.toml"
    course.write_text('[attention]\ndue = 2026-11-20T23:59:00+08:00\npolicy = "percent_per_day"\npercent = 10\n'
                      'cap = 50\n')
    out = tmp_path / "out"
    run = autograder("grade", archive, "--assignment", "attention", "--roster", ROSTER, "--course", course,
                     "--out", out, "-q")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8")))}
    assert rows["s2601"]["score"] == "20" and rows["s2601"]["late_penalty"] == "0"
    assert rows["s2602"]["late_penalty"] == "4" and rows["s2602"]["score"] == "16"  # 35 h: two started days
    assert rows["s2603"]["late_penalty"] == "2" == rows["s2604"]["late_penalty"]     # the group, 31 min late
    assert rows["Visitor X"]["score"] == "20"                                          # not on the roster
    assert rows["s2605"]["score"] == "0"                                               # no submission
    feedback = (out / "feedback" / "s2602.html").read_text(encoding="utf-8")
    assert "2026-11-22T10:59:00+08:00" in feedback and GRADESCOPE_SOURCE in feedback
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "迟交 / late −4" in report and "Anna Schmidt" in report and "不在名单 / not on the roster" in report


def test_a_broken_metadata_file_exits_2_naming_it(tmp_path):
    folder = write_export(tmp_path / "export", {"submission_1": SUBMISSIONS["submission_301"]},
                          yml="submission_1:\n  :submitters: [\n")
    run = autograder("grade", folder, "--assignment", "attention", "--out", tmp_path / "out", "-q")
    assert run.returncode == 2 and "submission_metadata.yml:" in run.stderr and "not valid YAML" in run.stderr
    assert "Traceback" not in run.stderr


# -- the Gradescope autograder: submission_metadata.json ------------------------------------------------------------
def metadata_root(tmp_path: Path, created: str, due: str, late_due: str | None = None) -> Path:
    meta = {"created_at": created, "users": [{"email": "a@example.edu", "id": 7, "name": "A"}],
            "assignment": {"due_date": due, "late_due_date": late_due, "title": "Attention"}}
    (tmp_path / "submission_metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    return tmp_path


def test_gradescope_autograder_notes_a_late_submission_and_leaves_the_score_to_gradescope(tmp_path):
    from autograder.integrations.grading import gradescope_lateness

    on_time = metadata_root(tmp_path, "2026-11-20T22:00:00.000000-08:00", "2026-11-20T23:59:00.000000-08:00")
    assert gradescope_lateness(on_time) is None
    late = gradescope_lateness(metadata_root(tmp_path, "2026-11-21T05:59:00.000000-08:00",
                                             "2026-11-20T23:59:00.000000-08:00", "2026-11-23T23:59:00.000000-08:00"))
    assert late is not None and "6.0 h after the due date 2026-11-20T23:59-08:00" in late.en and "6.0 小时" in late.zh
    assert "late due date" not in late.en
    after = gradescope_lateness(metadata_root(tmp_path, "2026-11-25T00:00:00+00:00", "2026-11-20T23:59:00-08:00",
                                              "2026-11-23T23:59:00-08:00"))
    assert after is not None and "late due date" in after.en
    for broken in ("{}", "[1, 2]", '{"created_at": "yesterday", "assignment": {"due_date": "2026-11-20"}}',
                   '{"created_at": "2026-11-21T00:00:00", "assignment": {"due_date": "2026-11-20T00:00:00"}}'):
        (tmp_path / "submission_metadata.json").write_text(broken, encoding="utf-8")
        assert gradescope_lateness(tmp_path) is None, broken  # odd or zone-less metadata: say nothing
