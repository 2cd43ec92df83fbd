"""Grades in the files an LMS imports, one row per roster student (no submission: 0).

- Canvas (gradebook import): `Student,ID,SIS User ID,SIS Login ID,Section,<Title> (<assignment id>)`, then a
  `Points Possible` row. Canvas matches a row by ID, then SIS User ID, then SIS Login ID, so every student needs one
  of them; the assignment column without an id makes Canvas create a new assignment.
- Moodle (grade import from CSV): one identifier column (`Username` when every student has a Moodle username,
  else `Email address`), the grade column, and a feedback column; the columns are mapped on Moodle's import page.
- Blackboard (Grade Center upload): `Username`, then `<Title> [Total Pts: <max> Score] |<column id>` (without a
  column id Blackboard creates a new column). The username is the roster's SIS Login ID, else its id.

Every text cell goes through `csv_cell` (no formulas); students not on the roster are not exported, they are listed.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from autograder.engine.results import SubmissionResult
from autograder.report.feedback import num
from autograder.report.render import csv_cell

from .intake import NO_SUBMISSION
from .roster import Roster

FORMATS = ("canvas", "moodle", "blackboard")


class ExportError(Exception):
    pass


@dataclass(frozen=True)
class Export:
    text: str                 # the CSV
    left_out: list[str]       # graded submitters not on the roster


def export(fmt: str, results: list[SubmissionResult], roster: Roster, title: str, max_score: float,
           lms_id: str | None = None) -> Export:
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    scores = {r.student: r for r in results}
    left_out = sorted(set(scores) - {s.id for s in roster.students})
    rows = [(s, scores.get(s.id)) for s in roster.students]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    if fmt == "canvas":
        unmatched = [s.id for s in roster.students
                     if not any(s.lms_ids.get(c) for c in ("canvas_id", "sis_user_id", "sis_login_id"))]
        if unmatched:
            raise ExportError(f"Canvas matches students by ID, SIS User ID or SIS Login ID; the roster has none for "
                              f"{', '.join(unmatched[:10])}")
        column = f"{title} ({lms_id})" if lms_id else title
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", csv_cell(column)])
        writer.writerow(["Points Possible", "", "", "", "", num(max_score)])
        for s, r in rows:
            writer.writerow([csv_cell(s.name), s.lms_ids.get("canvas_id", ""), csv_cell(s.lms_ids.get("sis_user_id", "")),
                             csv_cell(s.lms_ids.get("sis_login_id", "")), csv_cell(s.section), _score(r)])
    elif fmt == "moodle":
        by_username = all(s.lms_ids.get("moodle_username") for s in roster.students)
        if not by_username and not all(s.email for s in roster.students):
            raise ExportError("Moodle needs one identifier for every student: a moodle_username or an email")
        writer.writerow(["Username" if by_username else "Email address", csv_cell(title), "Feedback"])
        for s, r in rows:
            ident = s.lms_ids["moodle_username"] if by_username else s.email
            writer.writerow([csv_cell(ident), _score(r), csv_cell(_feedback(r, max_score))])
    else:
        column = f"{title} [Total Pts: {num(max_score)} Score]" + (f" |{lms_id}" if lms_id else "")
        writer.writerow(["Username", csv_cell(column)])
        for s, r in rows:
            writer.writerow([csv_cell(s.lms_ids.get("sis_login_id") or s.id), _score(r)])
    return Export(buffer.getvalue(), left_out)


def _score(result: SubmissionResult | None) -> str:
    return num(result.score) if result is not None else "0"


def _feedback(result: SubmissionResult | None, max_score: float) -> str:
    if result is None or (result.error_en == NO_SUBMISSION and not result.overrides):
        return "未提交 / no submission"
    said = "".join(f"; {o['author']}: {o['comment']}" for o in result.overrides)  # the course staff's changes
    if not result.graded:
        return f"未评分 / not graded: {result.error_en}{said}"
    return f"{num(result.score)}/{num(max_score)}{said}"
