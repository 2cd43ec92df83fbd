"""Grade one submission: load it, scan it, run every check against the sandboxed worker, score it.

Each check is independent: its failure, exception, timeout or crash costs its own points only (a crashed worker
is replaced for the next check). Checks of a function that uses a forbidden API score zero, with the reason.
Public checks run first; from the first hidden check on, nothing the student's code controls reaches the
student's feedback verbatim (printed output, exception messages and type names, measured numbers), so hidden
inputs cannot be read back through the feedback. A grader-side exception of any kind while handling one
submission becomes that submission's result ("internal error"), never the end of the run.
"""
from __future__ import annotations

import ast
import builtins
import fnmatch
import logging
import re
import time
from pathlib import Path
from typing import Callable

from autograder.sandbox.client import Sandbox, SandboxUnavailable, WorkerCrashed, WorkerTimeout, worker_zh
from autograder.sandbox.limits import Limits
from autograder.public.text import Text

from autograder.public import forbidden as forbidden_scan
from autograder.public.forbidden import FORBIDDEN_API
from .checks import Check, Suite
from autograder.public.expect import CheckFailed, Diagnosis
from .results import CheckResult, SubmissionResult
from .student import ForbiddenAPIUsed, RemoteStudent, Session, StudentError, SubmissionLoadError
from .submission import Submission, SubmissionError, load

log = logging.getLogger(__name__)


def grade_file(path: Path, student: str, suite: Suite, sandbox: Sandbox, limits: Limits,
               refs: dict) -> SubmissionResult:
    started = time.perf_counter()
    try:
        try:
            submission = load(path, {c.function for c in suite.checks})
        except SubmissionError as e:
            return ungradable(student, suite, path, e.text, started)
        result = grade_submission(submission, student, suite, sandbox, limits, refs)
    except SandboxUnavailable:  # the grader cannot do its job: stop the run, don't blame the student
        raise
    except (Exception, RecursionError, MemoryError) as e:  # a grader bug met on this submission: its row says so
        log.exception("internal error while grading %s", path)
        return ungradable(student, suite, path, Text(
            zh=f"评分程序内部错误（{type(e).__name__}），已记录在评分日志中",
            en=f"internal grader error ({type(e).__name__}); the course staff have been told in the grading log"),
            started)
    result.seconds = time.perf_counter() - started
    result.isolation = sandbox.tier.name
    return result


def ungradable(student: str, suite: Suite, path: Path | None, why: Text,
               started: float | None = None) -> SubmissionResult:
    """A result for a submission that could not be run at all: every check scores 0, with the reason."""
    checks = [_result(c, 0.0, "not_graded", en=why.en, zh=why.zh) for c in suite.checks]
    seconds = time.perf_counter() - started if started is not None else 0.0
    return SubmissionResult(student, suite.assignment, path.name if path else None, None, 0.0, suite.max_score,
                            checks, error_en=why.en, error_zh=why.zh, seconds=seconds)


def grade_submission(submission: Submission, student: str, suite: Suite, sandbox: Sandbox, limits: Limits,
                     refs: dict) -> SubmissionResult:
    session = Session(sandbox, submission, limits)
    try:
        checks = run_checks(suite, submission, RemoteStudent(session), refs, before_hidden=session.start_hidden)
    finally:
        session.close()
    score = sum(c.score for c in checks)
    return SubmissionResult(student, suite.assignment, submission.filename, submission.sha256, score,
                            suite.max_score, checks, output=session.output, staff_output=session.hidden_output)


def run_checks(suite: Suite, submission: Submission, proxy, refs: dict,
               before_hidden: Callable[[], None] = lambda: None) -> list[CheckResult]:
    """The one grading loop (`grade`, the integrations and `autograder check` all run it): every check of `suite`,
    public ones first, then `before_hidden()` once and the hidden ones. A function whose source names a forbidden
    API scores 0 in all its checks; one that hung or killed its worker is not called again. Results in suite order."""
    static = forbidden_scan.scan(submission.tree, list(suite.forbidden), set(suite.spec.functions),
                                 suite.spec.module_name)
    names = _defined_names(submission)
    results: dict[str, CheckResult] = {}
    stopped: dict[str, CheckResult] = {}  # function -> the check where it hung or killed its worker
    hidden = False
    for check in sorted(suite.checks, key=lambda c: c.visibility != "public"):
        if check.visibility != "public" and not hidden:
            before_hidden()
            hidden = True
        if check.function in static:
            result = _forbidden(check, sorted(static[check.function]), suite)
        elif check.function in stopped:
            first = stopped[check.function]
            result = _result(check, 0.0, first.status, en=f"not run: {check.function} already "
                             f"{STOPPED[first.status].en} in {first.name}",
                             zh=f"未运行：{check.function} 在 {first.name} 中已经{STOPPED[first.status].zh}")
        else:
            result = run_check(check, proxy, refs, suite, names)
            if result.status in ("timeout", "crashed"):
                stopped[check.function] = result
        results[check.name] = result
    ordered = [results[c.name] for c in suite.checks]
    note_redefinitions(ordered, submission)
    return apply_structural_policy(suite, ordered)


def apply_structural_policy(suite: Suite, results: list[CheckResult]) -> list[CheckResult]:
    """The one place the spec's `structural_needs_values` is applied: a function none of whose value checks passed
    scores 0 in its structural checks too (returning zeros of the right shape earns nothing). A function with no
    value check in `suite` (e.g. the public part only) keeps its structural points. Results in the same order."""
    if not suite.spec.structural_needs_values:
        return results
    kinds = {c.name: c.kind for c in suite.checks}
    has_values = {c.function for c in suite.checks if c.kind == "value"}
    valued = {r.function for r in results if kinds[r.name] == "value" and r.status == "passed"}
    for r in results:
        if kinds[r.name] == "structural" and r.status == "passed" and r.function in has_values - valued:
            r.score, r.status = 0.0, "failed"
            r.detail_en = (f"not counted: none of the value checks of {r.function} passes, and shape checks count only "
                           "together with one (returning placeholders of the right shape earns nothing)")
            r.detail_zh = f"不计分：{r.function} 的数值检查一个都没有通过，形状类检查只有在至少一个数值检查通过时才计分（返回形状正确的占位值不得分）"
    return results


def note_redefinitions(results: list[CheckResult], submission: Submission) -> None:
    """When a graded function is defined more than once (a notebook's later experiment cell, a pasted second
    version), a failed check of it says which definition was graded: the last one run."""
    for r in results:
        if r.status == "passed":
            continue
        places = submission.definitions(r.function)
        if len(places) < 2:
            continue
        en = ", ".join(p.en for p in places)
        zh = "、".join(p.zh for p in places)
        r.detail_en = (f"{r.detail_en} [{r.function} is defined {len(places)} times ({en}); the one graded is the "
                       f"last, {places[-1].en}]").strip()
        r.detail_zh = f"{r.detail_zh}［{r.function} 定义了 {len(places)} 次（{zh}）；评分的是最后一个，{places[-1].zh}］"
        if r.diagnosis:
            r.diagnosis_en = f"{r.diagnosis_en} (This is the definition {places[-1].en}.)"
            r.diagnosis_zh = f"{r.diagnosis_zh}（这是{places[-1].zh}的定义。）"


def _defined_names(submission: Submission) -> set[str]:
    """Names of the functions and classes the submission defines (to validate the worker's "in NAME")."""
    return {node.name for node in ast.walk(submission.tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} | {"<module>"}


def run_check(check: Check, proxy, refs: dict, suite: Suite, names: set[str] | None = None) -> CheckResult:
    """Run one check. For a hidden check, text the student's code controls is not repeated to the student: only
    the exception's type when it is a built-in one, and "line N, in NAME" when NAME is one of `names`."""
    fixtures = {"student": proxy, "refs": refs}
    public = check.visibility == "public"
    started = time.perf_counter()
    try:
        check.run(**{name: fixtures[name] for name in check.fixtures})
    except CheckFailed as e:
        en, zh = (f"{e.text.en} {e.measured.en}".strip(), f"{e.text.zh}{e.measured.zh}") if public else \
            (e.text.en, e.text.zh)
        r = _diagnose(_result(check, 0.0, "failed", en=en, zh=zh), e.diagnosis)
    except ForbiddenAPIUsed as e:
        r = _forbidden(check, e.apis, suite)
    except SubmissionLoadError as e:
        status = "timeout" if e.type == "Timeout" else "crashed" if e.type == "Crash" else "error"
        r = _result(check, 0.0, status, en=f"your file failed to run: {_summary(e, True, names)}",
                    zh=f"文件运行失败：{_summary(e, True, names, 'zh')}")
    except StudentError as e:
        if e.todo:
            r = _result(check, 0.0, "not_implemented", en=f"TODO({e.todo}) is not done yet",
                        zh=f"TODO({e.todo}) 还没有完成")
        else:
            r = _result(check, 0.0, "error", en=f"your code raised {_summary(e, public, names)}",
                        zh=f"你的代码抛出了异常 {_summary(e, public, names, 'zh')}".rstrip())
            _diagnose(r, e.diagnosis)
    except WorkerTimeout as e:
        r = _result(check, 0.0, "timeout", en=f"timed out: {e} (an infinite loop?)", zh=f"超时：{e.zh}（是否有死循环？）")
    except WorkerCrashed as e:
        # an invalid reply's details are the worker's own words: not repeated for a hidden check
        shown = public or not str(e).startswith("invalid reply")
        r = _result(check, 0.0, "crashed", en=f"your code stopped the process: {str(e) if shown else 'invalid reply'}",
                    zh=f"你的代码使进程终止：{e.zh}")  # the Chinese names no detail of an invalid reply
    except SandboxUnavailable:  # the grader cannot do its job: stop the run, don't blame the student
        raise
    except Exception as e:  # a bug in the check itself: never the student's fault, never fatal to the run
        log.exception("check %s raised", check.name)
        r = _result(check, 0.0, "error", en=f"internal grader error in {check.name}: {type(e).__name__}; "
                    "please report it to the course staff", zh=f"评分程序内部错误（{check.name}），请联系课程助教")
    else:
        r = _result(check, check.points, "passed")
    r.seconds = time.perf_counter() - started
    return r


WHERE = re.compile(r"^line (\d{1,7}), in ([\w<>]{1,100})$")


def _summary(e: StudentError, public: bool = True, names: set[str] | None = None, lang: str = "en") -> str:
    """The student's exception in a few words, in `lang` (the type and message are the student's, quoted as they
    are). Public: type, message and where. Hidden: the type if it is a built-in exception, the line and function if
    the function is the student's own; never the message. A load that timed out or crashed ("Timeout", "Crash")
    carries the grader's own sentence, given in `lang`."""
    where = WHERE.match(e.where)
    zh = lang == "zh"
    if zh and e.type in LOAD_PROBLEM and isinstance(e, SubmissionLoadError):
        return worker_zh(e.message, LOAD_PROBLEM[e.type])
    at = (f"（{where.group(2)} 第 {where.group(1)} 行）" if zh else f" (line {where.group(1)}, in {where.group(2)})") \
        if where else ""
    if public:
        return f"{e.type}: {e.message[:300]}{at}"
    kind = e.type if isinstance(getattr(builtins, e.type, None), type) and \
        issubclass(getattr(builtins, e.type), BaseException) else ("" if zh else "an exception")
    if where and (names is None or where.group(2) in names):
        return f"{kind}{at}"
    return kind


# How a status that stops a function reads in "already ..." (runner.run_checks), and the grader's own load failures.
STOPPED = {"timeout": Text(zh="超时", en="timed out"), "crashed": Text(zh="崩溃", en="crashed")}
LOAD_PROBLEM = {"Timeout": "超时", "Crash": "进程意外终止"}   # engine/student.py: SubmissionLoadError({"type": ...})


def _diagnose(result: CheckResult, diagnosis: Diagnosis | None) -> CheckResult:
    if diagnosis is not None:
        result.diagnosis, result.diagnosis_zh, result.diagnosis_en = diagnosis.id, diagnosis.zh, diagnosis.en
    return result


def _why_forbidden(api: str, forbidden: dict[str, str]) -> str:
    """The assignment's reason for `api`: its own entry, or the ``op:`` glob an aten operator matched."""
    if api in forbidden:
        return forbidden[api]
    op = api.removeprefix("aten::").split(".")[0]
    return next((why for name, why in forbidden.items()
                 if name.startswith("op:") and fnmatch.fnmatchcase(op, name[3:])), "not allowed in this assignment")


def _forbidden(check: Check, apis: list[str], suite: Suite) -> CheckResult:
    why_en = "; ".join(f"{api}: {_why_forbidden(api, suite.forbidden)}" for api in apis)
    result = _result(check, 0.0, "forbidden",
                     en=f"{check.function} uses a forbidden API ({why_en}); implement it yourself",
                     zh=f"{check.function} 使用了禁止的现成 API（{', '.join(apis)}）；请自己实现")
    return _diagnose(result, FORBIDDEN_API)


def _result(check: Check, score: float, status: str, *, en: str = "", zh: str = "") -> CheckResult:
    return CheckResult(check.name, check.function, score, check.points, status, check.visibility, check.zh, check.en,
                       detail_zh=zh, detail_en=en)
