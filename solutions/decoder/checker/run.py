"""Run public checks on the student's code in this process (the released checker's loop; the grader runs the same
checks in its sandbox, with its own loop). Each check is independent; a check that
runs longer than `timeout` seconds is stopped (POSIX main thread), and the rest of that function's checks skipped."""
from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from .check import Check
from .errors import StudentError
from .expect import CheckFailed, Diagnosis
from .forbidden import FORBIDDEN_API
from .text import Text


class CheckTimeout(BaseException):
    """Raised in the main thread when a check runs too long (BaseException: student `except Exception` misses it)."""


@dataclass(frozen=True)
class Outcome:
    check: Check
    status: str            # a key of status.STATUS
    detail: Text           # what went wrong ("" when passed)
    diagnosis: Diagnosis | None
    seconds: float

    @property
    def title(self) -> Text:
        return Text(zh=self.check.zh, en=self.check.en)


@contextmanager
def deadline(seconds: float):
    """Raise CheckTimeout in the main thread after `seconds` (no limit elsewhere, or where SIGALRM is missing)."""
    usable = seconds > 0 and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise CheckTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_one(check: Check, student, timeout: float = 10.0) -> Outcome:
    started = time.perf_counter()
    status, detail, diagnosis = "passed", Text(zh="", en=""), None
    try:
        with deadline(timeout):
            check.run(student)
    except CheckFailed as e:
        status, detail, diagnosis = "failed", e.text + e.measured, e.diagnosis
    except StudentError as e:
        if e.todo:
            status, detail = "not_implemented", Text(zh=f"TODO({e.todo}) 还没有完成", en=f"TODO({e.todo}) is not done yet")
        else:
            said = f"{e.type}: {e.message[:300]}" + (f" ({e.where})" if e.where else "")
            status, detail, diagnosis = "error", Text(zh=f"你的代码抛出了异常 {said}", en=f"your code raised {said}"), e.diagnosis
    except CheckTimeout:
        status, detail = "timeout", Text(zh=f"{timeout:g} 秒内没有结束（是否有死循环？）",
                                         en=f"no answer within {timeout:g} s (an infinite loop?)")
    except Exception as e:  # student objects can raise from anywhere (e.g. a result whose __eq__ raises)
        status, detail = "error", Text(zh=f"检查时出错：{type(e).__name__}: {str(e)[:300]}",
                                       en=f"error while checking: {type(e).__name__}: {str(e)[:300]}")
    return Outcome(check, status, detail, diagnosis, time.perf_counter() - started)


def run(checks: list[Check], student, timeout: float = 10.0,
        forbidden: dict[str, set[str]] | None = None) -> list[Outcome]:
    """`forbidden`: graded function -> the forbidden APIs its source uses (`forbidden.scan`); its checks score 0."""
    outcomes, stopped = [], set()
    for check in checks:
        apis = sorted((forbidden or {}).get(check.function, ()))
        if apis:
            outcomes.append(Outcome(check, "forbidden", Text(
                zh=f"{check.function} 使用了禁止的现成 API（{', '.join(apis)}）；请自己实现",
                en=f"{check.function} uses a forbidden API ({', '.join(apis)}); implement it yourself"), FORBIDDEN_API, 0.0))
            continue
        if check.function in stopped:
            outcomes.append(Outcome(check, "not_graded", Text(zh=f"跳过：{check.function} 之前超时了",
                                                              en=f"skipped: {check.function} timed out before"),
                                    None, 0.0))
            continue
        outcome = run_one(check, student, timeout)
        if outcome.status == "timeout":
            stopped.add(check.function)
        outcomes.append(outcome)
    return outcomes
