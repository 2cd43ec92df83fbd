"""Write a class's outputs into OUT from its results."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from autograder.engine.checks import Suite
from autograder.engine.results import SubmissionResult, to_gradescope

from .class_report import class_report_html
from .render import ENV, code_fence, csv_cell, file_stem, num

STATUS_ICON = {"passed": "✅", "failed": "❌", "error": "💥", "not_implemented": "📝", "timeout": "⏱️",
               "crashed": "💥", "forbidden": "🚫", "not_graded": "—"}


def write_outputs(out: Path, suite: Suite, results: list[SubmissionResult], stats: dict,
                  already_written: set[str] = frozenset()) -> dict[str, Path]:
    """grades.csv, the class report, run.json (this run's figures: counts, seconds, the largest worker's memory)
    and each student's files (except those `write_student` wrote during the run)."""
    write_grades_csv(out / "grades.csv", suite, results)
    _write(out / "run.json", json.dumps({"assignment": suite.assignment, **stats}, indent=2, sort_keys=True) + "\n")
    for r in results:
        if r.student not in already_written:
            write_student(out, r)
    _write(out / "report.html", class_report_html(suite, results, stats.get("isolation")))
    return {"grades": out / "grades.csv", "report": out / "report.html", "feedback": out / "feedback",
            "run": out / "run.json"}


def write_student(out: Path, result: SubmissionResult) -> None:
    """feedback/<stem>.md and .html, results/<stem>.json (Gradescope format); <stem> = `file_stem(student)`, so no
    id can name a file outside those folders."""
    for folder in ("feedback", "results"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    stem = file_stem(result.student)
    _write(out / "feedback" / f"{stem}.md", feedback("feedback.md.j2", result))
    _write(out / "feedback" / f"{stem}.html", feedback("feedback.html.j2", result))
    _write(out / "results" / f"{stem}.json",
           json.dumps(to_gradescope(result), ensure_ascii=False, indent=2) + "\n")


def write_grades_csv(path: Path, suite: Suite, results: list[SubmissionResult]) -> None:
    """One row per student, RFC 4180 (CRLF rows; a field holding CR, LF, a comma or a quote is quoted), text cells
    through `csv_cell` so no id is read as a formula."""
    names = [c.name for c in suite.checks]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
        writer.writerow([csv_cell(h) for h in ("student", "score", "max_score", *names)])
        for r in sorted(results, key=lambda r: r.student):
            earned = {c.name: c.score for c in r.checks}
            writer.writerow([csv_cell(r.student), num(r.score), num(r.max_score),
                             *(num(earned.get(n, 0.0)) for n in names)])


def feedback(template: str, result: SubmissionResult) -> str:
    """One student's feedback, as Markdown (feedback.md.j2) or as a standalone HTML page (feedback.html.j2)."""
    return ENV.get_template(template).render(r=result, icon=STATUS_ICON, num=num, groups=problem_groups(result),
                                             fence=code_fence(result.output or ""))


def problem_groups(result: SubmissionResult) -> list[dict]:
    """Failed checks per function, in check order, each function with its distinct diagnoses (said once)."""
    groups: dict[str, dict] = {}
    for c in result.checks:
        if c.status == "passed":
            continue
        group = groups.setdefault(c.function, {"function": c.function, "checks": [], "diagnoses": {}})
        group["checks"].append(c)
        if c.diagnosis:
            group["diagnoses"].setdefault(c.diagnosis, (c.diagnosis_zh, c.diagnosis_en))
    return list(groups.values())


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
