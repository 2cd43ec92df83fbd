"""Write a class's outputs into OUT from its results."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from autograder.engine.checks import Suite
from autograder.engine.results import SubmissionResult

from .class_report import class_report_html
from .feedback import HIDDEN, feedback, gradescope_json
from .render import ENV, code_fence, csv_cell, file_stem, num

def write_outputs(out: Path, suite: Suite, results: list[SubmissionResult], stats: dict,
                  already_written: set[str] = frozenset()) -> dict[str, Path]:
    """grades.csv, the class report, run.json (this run's figures: counts, seconds, the largest worker's memory)
    and each student's files (except those `write_student` wrote during the run)."""
    write_grades_csv(out / "grades.csv", suite, results)
    _write(out / "run.json", json.dumps({"assignment": suite.assignment, **stats}, indent=2, sort_keys=True) + "\n")
    for r in results:
        if r.student not in already_written:
            write_student(out, r)
    people = (stats.get("roster") or {}).get("students")  # the roster's names and sections, when graded with one
    _write(out / "report.html", class_report_html(suite, results, stats.get("isolation"), stats.get("similarity"),
                                                  people))
    return {"grades": out / "grades.csv", "report": out / "report.html", "feedback": out / "feedback",
            "run": out / "run.json"}


def write_student(out: Path, result: SubmissionResult) -> None:
    """feedback/<stem>.md and .html, results/<stem>.json (Gradescope format); <stem> = `file_stem(student)`, so no
    id can name a file outside those folders."""
    for folder in ("feedback", "results"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    stem = file_stem(result.student)
    fb = feedback(result)
    _write(out / "feedback" / f"{stem}.md", render_feedback("feedback.md.j2", fb))
    _write(out / "feedback" / f"{stem}.html", render_feedback("feedback.html.j2", fb))
    _write(out / "results" / f"{stem}.json", json.dumps(gradescope_json(fb), ensure_ascii=False, indent=2) + "\n")


def write_grades_csv(path: Path, suite: Suite, results: list[SubmissionResult]) -> None:
    """One row per student, RFC 4180 (CRLF rows; a field holding CR, LF, a comma or a quote is quoted), text cells
    through `csv_cell` so no id is read as a formula."""
    names = [c.name for c in suite.checks]
    late = any(r.late for r in results)  # with a late policy: the raw score and the penalty are kept beside it
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
        writer.writerow([csv_cell(h) for h in ("student", "score", "max_score", *names,
                                               *(("raw_score", "late_penalty") if late else ()))])
        for r in sorted(results, key=lambda r: r.student):
            earned = {c.name: c.score for c in r.checks}
            kept = (num(r.late.get("raw_score", r.score)), num(r.late.get("penalty", 0.0))) if late else ()
            writer.writerow([csv_cell(r.student), num(r.score), num(r.max_score),
                             *(num(earned.get(n, 0.0)) for n in names), *kept])


def render_feedback(template: str, fb) -> str:
    """One student's feedback, as Markdown (feedback.md.j2) or as a standalone HTML page (feedback.html.j2)."""
    return ENV.get_template(template).render(fb=fb, num=num, hidden=HIDDEN, fence=code_fence(fb.output or ""))


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
