"""report.html: the class at a glance, readable offline (the histogram is an embedded PNG). Its only script is
report/sortable.py's, which sorts the per-student table; the page's Content-Security-Policy lets no other run."""
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

from .feedback import STATUS  # noqa: E402
from .render import ENV, file_stem, num  # noqa: E402
from .sortable import SORT_SCRIPT, content_security_policy  # noqa: E402

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


def summarise(suite: Suite, results: list[SubmissionResult], people: dict[str, dict] | None = None) -> dict:
    """`people`: the roster's students (id -> {name, section}), when the class was graded with one."""
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
    missing = [r.student for r, _ in troubles if not r.graded and r.error_en == NO_SUBMISSION]  # listed once
    troubles = [(r, cs) for r, cs in troubles if cs or (not r.graded and r.error_en != NO_SUBMISSION)]
    dues = Counter(r.late.get("due") for r in results if r.late)
    usual_due = dues.most_common(1)[0][0] if dues else None
    scores = [r.score for r in results]
    return {
        "n": len(results), "graded": len(graded), "max_score": suite.max_score,
        "mean": sum(scores) / len(scores) if scores else 0.0,           # over everyone: ungraded count as 0
        "mean_graded": sum(r.score for r in graded) / len(graded) if graded else 0.0,
        "roster": people is not None,
        "any_late": any(r.late for r in results),
        "students": [_row(r, people, usual_due) for r in sorted(results, key=lambda r: r.student)],
        "names": {i: p.get("name", "") for i, p in (people or {}).items()},
        "full": sum(r.score == r.max_score for r in results),
        "per_check": per_check,
        "mistakes": [(f, d, n, texts[(f, d)]) for (f, d), n in mistakes.most_common()],
        "troubles": troubles,
        "missing": missing,
    }


def _row(result: SubmissionResult, people: dict[str, dict] | None, usual_due: str | None = None) -> dict:
    """One line of the per-student table: who, the marks beside the score (each a (text, kind) pair, `kind` its
    CSS class), and the late column."""
    person = (people or {}).get(result.student)
    marks = []
    if people is not None and person is None:
        marks.append(("不在名单 / not on the roster", "unknown"))
    if result.overrides:
        marks.append(("人工调整 / override", "override"))
    if not result.graded:
        marks.append(("未提交 / no submission", "missing") if result.error_en == NO_SUBMISSION
                     else ("未评分 / not graded", "problem"))
    else:
        marks += [(f"{STATUS[status].zh} / {STATUS[status].en}", "problem") for status in
                  sorted({c.status for c in result.checks if c.status in PROBLEM_STATUSES})]
    return {"r": result, "stem": file_stem(result.student), "name": (person or {}).get("name", ""),
            "section": (person or {}).get("section", ""), "marks": marks,
            "late": _late(result.late, usual_due)}


def _short_time(iso: str | None) -> str:
    """`2026-11-20T23:10:00+08:00` -> `2026-11-20 23:10 +08:00`."""
    return iso.replace("T", " ")[:16] + (" " + iso[19:] if len(iso) > 19 else "") if iso else ""


def _late(late: dict, usual_due: str | None = None) -> dict | None:
    """The late column: what to show, its kind, when it was handed in, an extension (a due date other than the
    class's), the policy's note; sorted by penalty."""
    if not late:
        return None
    when = late.get("submitted_at")
    shown = _short_time(when)
    extended = _short_time(late.get("due"))[5:16] if usual_due and late.get("due") != usual_due else ""
    if late.get("penalty"):
        text, kind = f"迟交 / late −{num(late['penalty'])}", "late"
    elif when is None and late.get("note", "").startswith("marked late"):
        text, kind = "标记迟交，时间未知 / marked late, time unknown", "late-unknown"
    elif when is None:
        text, kind = "时间未知 / time unknown", "quiet"
    else:
        text, kind = "", ""
    return {"text": text, "kind": kind, "when": shown, "note": late.get("note", ""), "penalty": late.get("penalty", 0),
            "extended": extended}


def class_report_html(suite: Suite, results: list[SubmissionResult], isolation: dict | None = None,
                      similarity: dict | None = None, people: dict[str, dict] | None = None) -> str:
    """`isolation`: this run's sandbox tier (`Tier.to_json()`); results graded earlier say their own tier.
    `similarity`: this run's flagged pairs (classroom/similarity.py). `people`: the roster (id -> name, section)."""
    summary = summarise(suite, results, people)
    png = score_histogram_png([r.score for r in results], suite.max_score) if results else ""
    tiers = sorted({r.isolation or "?" for r in results if r.graded})
    return ENV.get_template("report.html.j2").render(s=summary, suite=suite, png=png, num=num, isolation=isolation,
                                                     tiers=tiers, similarity=similarity, script=SORT_SCRIPT,
                                                     csp=content_security_policy(SORT_SCRIPT))
