"""report.html: the class at a glance, readable offline (the histogram is an embedded PNG, no scripts)."""
from __future__ import annotations

import base64
import io
from collections import Counter

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from autograder.engine.checks import Suite  # noqa: E402
from autograder.classroom.intake import NO_SUBMISSION  # noqa: E402
from autograder.engine.results import SubmissionResult  # noqa: E402

from .render import ENV, file_stem, num  # noqa: E402

PROBLEM_STATUSES = {"error", "timeout", "crashed", "forbidden"}


def score_histogram_png(scores: list[float], max_score: float) -> str:
    """Base64 PNG of the score distribution, one bar per point."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=100)
    bins = [x - 0.5 for x in range(int(max_score) + 2)]
    ax.hist(scores, bins=bins, color="#4c72b0", edgecolor="white")
    ax.set_xlabel("score")
    ax.set_ylabel("students")
    ax.set_xlim(-0.5, max_score + 0.5)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def summarise(suite: Suite, results: list[SubmissionResult]) -> dict:
    graded = [r for r in results if r.graded]
    per_check = []
    for check in suite.checks:
        outcomes = [c for r in graded for c in r.checks if c.name == check.name]
        passed = sum(c.status == "passed" for c in outcomes)
        per_check.append({"check": check, "passed": passed, "total": len(outcomes),
                          "rate": passed / len(outcomes) if outcomes else 0.0})
    mistakes = Counter()
    texts = {}
    for r in graded:
        for key, c in {(c.function, c.diagnosis): c for c in r.checks if c.diagnosis}.items():
            mistakes[key] += 1
            texts[key] = (c.diagnosis_zh, c.diagnosis_en)
    troubles = [(r, [c for c in r.checks if c.status in PROBLEM_STATUSES]) for r in results]
    troubles = [(r, cs) for r, cs in troubles if cs or not r.graded]
    scores = [r.score for r in results]
    return {
        "n": len(results), "graded": len(graded), "max_score": suite.max_score,
        "mean": sum(scores) / len(scores) if scores else 0.0,           # over everyone: ungraded count as 0
        "mean_graded": sum(r.score for r in graded) / len(graded) if graded else 0.0,
        "students": [{"r": r, "stem": file_stem(r.student), "mark": _mark(r)}
                     for r in sorted(results, key=lambda r: r.student)],
        "full": sum(r.score == r.max_score for r in results),
        "per_check": per_check,
        "mistakes": [(f, d, n, texts[(f, d)]) for (f, d), n in mistakes.most_common()],
        "troubles": troubles,
    }


def _mark(result: SubmissionResult) -> str:
    """What the per-student table says beside the score: no submission, not graded, or the problems it met."""
    marks = ["人工调整 / override"] if result.overrides else []
    if result.late.get("penalty"):
        marks.append(f"迟交 / late −{num(result.late['penalty'])}")
    if not result.graded:
        return ", ".join([*marks, "未提交 / no submission" if result.error_en == NO_SUBMISSION else "未评分 / not graded"])
    return ", ".join([*marks, *sorted({c.status for c in result.checks if c.status in PROBLEM_STATUSES})])


def class_report_html(suite: Suite, results: list[SubmissionResult], isolation: dict | None = None,
                      similarity: dict | None = None) -> str:
    """`isolation`: this run's sandbox tier (`Tier.to_json()`); results graded earlier say their own tier.
    `similarity`: this run's flagged pairs (classroom/similarity.py)."""
    summary = summarise(suite, results)
    png = score_histogram_png([r.score for r in results], suite.max_score) if results else ""
    tiers = sorted({r.isolation or "?" for r in results if r.graded})
    return ENV.get_template("report.html.j2").render(s=summary, suite=suite, png=png, num=num, isolation=isolation,
                                                     tiers=tiers, similarity=similarity)
