"""Grade one submission: load it, scan it, run every check against the sandboxed worker, score it.

Each check is independent: its failure, exception, timeout or crash costs its own points only (a crashed worker
is replaced for the next check). Checks of a function that uses a forbidden API score zero, with the reason.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from autograder.sandbox.client import Sandbox, SandboxUnavailable, WorkerCrashed, WorkerTimeout
from autograder.sandbox.limits import Limits

from . import forbidden as forbidden_scan
from .checks import Check, Suite
from .expect import CheckFailed, Diagnosis
from .results import CheckResult, SubmissionResult
from .student import ForbiddenAPIUsed, RemoteStudent, Session, StudentError, SubmissionLoadError
from .submission import Submission, SubmissionError, load

log = logging.getLogger(__name__)


def grade_file(path: Path, student: str, suite: Suite, sandbox: Sandbox, limits: Limits,
               refs: dict) -> SubmissionResult:
    started = time.perf_counter()
    try:
        submission = load(path, {c.function for c in suite.checks})
    except SubmissionError as e:
        return ungradable(student, suite, path, e.en, e.zh, started)
    result = grade_submission(submission, student, suite, sandbox, limits, refs)
    result.seconds = time.perf_counter() - started
    return result


def ungradable(student: str, suite: Suite, path: Path | None, en: str, zh: str,
               started: float | None = None) -> SubmissionResult:
    """A result for a submission that could not be run at all: every check scores 0, with the reason."""
    checks = [_result(c, 0.0, "not_graded", en, zh) for c in suite.checks]
    seconds = time.perf_counter() - started if started is not None else 0.0
    return SubmissionResult(student, suite.assignment, path.name if path else None, None, 0.0, suite.max_score,
                            checks, en, zh, seconds=seconds)


def grade_submission(submission: Submission, student: str, suite: Suite, sandbox: Sandbox, limits: Limits,
                     refs: dict) -> SubmissionResult:
    static = forbidden_scan.scan(submission.tree, list(suite.forbidden), {c.function for c in suite.checks})
    session = Session(sandbox, submission, list(suite.forbidden), limits)
    proxy = RemoteStudent(session)
    checks = []
    stopped: dict[str, CheckResult] = {}  # function -> the check where it hung or killed its worker
    try:
        for check in suite.checks:
            if check.function in static:
                checks.append(_forbidden(check, sorted(static[check.function]), suite))
            elif check.function in stopped:
                first = stopped[check.function]
                checks.append(_result(check, 0.0, first.status, f"not run: {check.function} already {first.status} "
                                      f"in {first.name}", f"未运行：{check.function} 在 {first.name} 中已{first.status}"))
            else:
                result = run_check(check, proxy, refs, suite)
                if result.status in ("timeout", "crashed"):
                    stopped[check.function] = result
                checks.append(result)
    finally:
        session.close()
    score = sum(c.score for c in checks)
    return SubmissionResult(student, suite.assignment, submission.filename, submission.sha256, score,
                            suite.max_score, checks, output=session.output)


def run_check(check: Check, proxy, refs: dict, suite: Suite) -> CheckResult:
    fixtures = {"student": proxy, "refs": refs}
    started = time.perf_counter()
    try:
        check.run(**{name: fixtures[name] for name in check.fixtures})
    except CheckFailed as e:
        r = _diagnose(_result(check, 0.0, "failed", e.en, e.zh), e.diagnosis)
    except ForbiddenAPIUsed as e:
        r = _forbidden(check, e.apis, suite)
    except SubmissionLoadError as e:
        status = "timeout" if e.type == "Timeout" else "crashed" if e.type == "Crash" else "error"
        r = _result(check, 0.0, status, f"your file failed to run: {_summary(e)}", f"文件运行失败：{_summary(e)}")
    except StudentError as e:
        if e.todo:
            r = _result(check, 0.0, "not_implemented", f"TODO({e.todo}) is not done yet", f"TODO({e.todo}) 还没有完成")
        else:
            r = _result(check, 0.0, "error", f"your code raised {_summary(e)}", f"你的代码抛出了异常 {_summary(e)}")
            _diagnose(r, e.diagnosis)
    except WorkerTimeout as e:
        r = _result(check, 0.0, "timeout", f"timed out: {e} (an infinite loop?)", f"超时：{e}（是否有死循环？）")
    except WorkerCrashed as e:
        r = _result(check, 0.0, "crashed", f"your code stopped the process: {e}", f"你的代码使进程终止：{e}")
    except SandboxUnavailable:  # the grader cannot do its job: stop the run, don't blame the student
        raise
    except Exception as e:  # a bug in the check itself: never the student's fault, never fatal to the run
        log.exception("check %s raised", check.name)
        r = _result(check, 0.0, "error", f"internal grader error in {check.name}: {type(e).__name__}: {e}; "
                    "please report it to the course staff", f"评分程序内部错误（{check.name}），请联系课程助教")
    else:
        r = _result(check, check.points, "passed")
    r.seconds = time.perf_counter() - started
    return r


def _summary(e: StudentError) -> str:
    where = f" ({e.where})" if e.where else ""
    return f"{e.type}: {e.message[:300]}{where}"


def _diagnose(result: CheckResult, diagnosis: Diagnosis | None) -> CheckResult:
    if diagnosis is not None:
        result.diagnosis, result.diagnosis_zh, result.diagnosis_en = diagnosis.id, diagnosis.zh, diagnosis.en
    return result


def _forbidden(check: Check, apis: list[str], suite: Suite) -> CheckResult:
    why_en = "; ".join(f"{api}: {suite.forbidden.get(api, 'ready-made attention')}" for api in apis)
    result = _result(check, 0.0, "forbidden",
                     f"{check.function} uses a forbidden API ({why_en}); implement it yourself",
                     f"{check.function} 使用了禁止的现成 API（{', '.join(apis)}）；请自己实现")
    return _diagnose(result, FORBIDDEN_API)


FORBIDDEN_API = Diagnosis("forbidden_api", "你调用了作业要求你自己实现的现成函数：只要还在用它，这个函数的检查都得 0 分。请删掉这个调用，用基本的张量运算自己写。",
                          "You call a ready-made function that the assignment asks you to write yourself: every check "
                          "of this function scores 0 while it is used. Remove the call and build the computation "
                          "from basic tensor operations.")


def _result(check: Check, score: float, status: str, en: str = "", zh: str = "") -> CheckResult:
    return CheckResult(check.name, check.function, score, check.points, status, check.visibility, check.zh, check.en,
                       detail_zh=zh, detail_en=en)
