"""Feedback wording shared by the integrations: points per graded function and every check in zh + en."""
from __future__ import annotations

from autograder.engine.checks import Suite
from autograder.engine.results import SubmissionResult


def num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def function_points(result: SubmissionResult, function: str) -> tuple[float, float]:
    """(earned, possible) for the checks of one graded function."""
    checks = [c for c in result.checks if c.function == function]
    return sum(c.score for c in checks), sum(c.max_score for c in checks)


def check_lines(check) -> list[str]:
    """One check in words: mark, points, what it tests; what went wrong and the diagnosis when it failed."""
    mark = "✔" if check.status == "passed" else "✘"
    hidden = " [隐藏 / hidden]" if check.visibility == "hidden" else ""
    lines = [f"{mark} {check.name}{hidden} ({num(check.score)}/{num(check.max_score)}): {check.zh} / {check.en}"]
    if check.status != "passed":
        lines += [f"    {line}" for line in (check.detail_zh, check.detail_en) if line]
        if check.diagnosis:
            lines += [f"    {line}" for line in (check.diagnosis_zh, check.diagnosis_en) if line]
    return lines


def function_feedback(result: SubmissionResult, function: str) -> str:
    """Bilingual feedback for one function: its points and every one of its checks."""
    earned, possible = function_points(result, function)
    lines = [f"{function}: {num(earned)}/{num(possible)} 分 / points — 由隔离评分程序评出 / scored by the isolated grader"]
    if result.error_en:
        lines += [f"    {result.error_zh}", f"    {result.error_en}"]
    for check in result.checks:
        if check.function == function:
            lines += check_lines(check)
    return "\n".join(lines) + "\n"


def summary(result: SubmissionResult) -> str:
    """Overall score line, plus the reason when the submission could not be graded at all."""
    text = f"总分 / total: {num(result.score)}/{num(result.max_score)}"
    if result.error_en:
        text += f"\n{result.error_zh}\n{result.error_en}"
    return text


def functions(suite: Suite) -> dict[str, float]:
    """Graded functions in check order, with their total points."""
    points: dict[str, float] = {}
    for check in suite.checks:
        points[check.function] = points.get(check.function, 0.0) + check.points
    return points
