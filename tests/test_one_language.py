"""One language per message: in the feedback of submissions that time out, crash, are killed or raise, every
Chinese text is Chinese (English only as code, identifiers, acronyms or the student's own data quoted as it is) and
every English text has no Chinese in it. Also the grader's own sentences about workers, exceptions and lateness,
each checked on its own."""
from __future__ import annotations

import builtins
import re

import pytest

from fixtures.compose import FIXTURES, base_solution_source, submission_bytes
from autograder.engine.runner import _summary
from autograder.engine.student import StudentError, SubmissionLoadError
from autograder.report.feedback import feedback, late_note_zh, late_text
from autograder.sandbox.client import WorkerCrashed, WorkerTimeout, worker_zh

CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]")
CODE = re.compile(r"`[^`]*`")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
CODE_NEIGHBOURS = set("[](){}<>=*/'\"`")
# English that is code or a name in any language: Python's exception types, torch, the assignment's own names
NAMES = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)} | {
    "torch", "exit", "seed", "softmax", "dim", "keepdim", "dtype", "bool", "float", "int", "causal", "mask", "d_head",
    "sqrt", "inf", "nan", "id", "x", "True", "False", "None",
    "output", "weights"}  # the names of the contract's return values, `(output, weights)`
HOSTILE = FIXTURES / "attention" / "hostile"
SUBMISSIONS = {  # name -> (source, what the feedback must show: a status every check of sdpa or the file gets)
    "infinite_loop_in_sdpa": ("fixture", "timeout"),
    "os_exit_in_sdpa": ("fixture", "crashed"),
    "huge_alloc_in_sdpa": ("fixture", None),          # killed at the memory cap, or MemoryError: either is data
    "sys_exit_at_import": ("fixture", "error"),
    "exception_leak": ("fixture", "error"),
    "loops_at_import": ("append", "timeout"),
    "raises_in_public_check": ("override", "error"),
}
APPENDED = "\nwhile True:\n    pass\n"
OVERRIDE = '''
def causal_mask(seq_len):
    raise ValueError("my mask is unfinished")
'''


def english_words(zh: str, allowed: set[str]) -> list[str]:
    """The English words of a Chinese text that are neither code nor names nor the student's data."""
    found = []
    zh = CODE.sub("", zh)
    for match in WORD.finditer(zh):
        word, before, after = match.group(), zh[match.start() - 1: match.start()], zh[match.end(): match.end() + 1]
        if "_" in word or "." in word or word in allowed or word in NAMES or len(word) == 1:
            continue  # identifiers, names, one-letter variables (`x[..., t, h]`)
        if before in CODE_NEIGHBOURS or after in CODE_NEIGHBOURS:
            continue  # part of an expression: `out[...]`, `<module>`, `f(x)`
        if word.isupper() or (any(c.isupper() for c in word[1:])) or any(c.isdigit() for c in word):
            continue  # acronyms (API, MiB, TODO, NaN...) and CamelCase identifiers (MultiHeadAttention)
        found.append(word)
    return found


def assert_one_language(text, allowed: set[str], where: str) -> None:
    assert not CJK.search(text.en), f"{where}: Chinese in the English text: {text.en!r}"
    words = english_words(text.zh, allowed)
    assert not words, f"{where}: English {words} in the Chinese text: {text.zh!r}"


def texts_of(fb):
    yield "error", fb.error
    for line in fb.lines:
        yield f"{line.name} title", line.title
        yield f"{line.name} detail", line.detail
        yield f"{line.name} diagnosis", line.diagnosis_text
    yield "late", fb.late


def source_for(name: str, how: str) -> bytes:
    if how == "fixture":
        return submission_bytes(HOSTILE / f"{name}.py", base_solution_source())
    base = base_solution_source()
    return (base + APPENDED if how == "append" else base + OVERRIDE).encode()


@pytest.mark.parametrize("name", sorted(SUBMISSIONS))
def test_feedback_of_failing_submissions_is_one_language_per_text(name, grade, suite, tmp_path):
    how, status = SUBMISSIONS[name]
    path = tmp_path / name / "attention.py"
    path.parent.mkdir()
    path.write_bytes(source_for(name, how))
    result = grade(path)
    statuses = {c.status for c in result.checks}
    if status is not None:
        assert status in statuses, [(c.name, c.status, c.detail_en) for c in result.checks]
    # the student's own words may be quoted in either language: what their code raises or prints
    allowed = {c.function for c in suite.checks} | {c.name for c in suite.checks} | {"my", "is", "unfinished"}
    fb = feedback(result)
    for where, text in texts_of(fb):
        if text is not None:
            assert_one_language(text, allowed, f"{name}: {where}")
    assert any(line.detail.zh for line in fb.lines if not line.passed)


def test_a_function_that_hung_says_so_in_each_language_in_its_later_checks(grade, tmp_path):
    path = tmp_path / "attention.py"
    path.write_bytes(source_for("infinite_loop_in_sdpa", "fixture"))
    later = [c for c in grade(path).checks if c.detail_en.startswith("not run:")]
    assert later, "the later checks of a function that hung are not run"
    assert all(" already timed out in " in c.detail_en for c in later), [c.detail_en for c in later]
    assert all("已经超时" in c.detail_zh and "timeout" not in c.detail_zh for c in later), [c.detail_zh for c in later]


# -- the grader's own sentences, one by one ---------------------------------------------------------------------
@pytest.mark.parametrize("error", [
    WorkerTimeout("no answer within 3 s"), WorkerTimeout("no answer after 10 s"),
    WorkerTimeout("the submission used its whole 60 s budget"),
    WorkerCrashed("the worker was restarted 3 times; giving up on this submission"),
    WorkerCrashed("the worker is no longer running"), WorkerCrashed("memory limit of 1024 MiB exceeded"),
    WorkerCrashed("the process ended (exit, os._exit, a crash, or a resource limit)"),
    WorkerCrashed("invalid reply: frame of 9999999 bytes exceeds the cap"), WorkerCrashed("invalid reply"),
    WorkerCrashed("something nobody wrote down yet"),
], ids=str)
def test_worker_problems_have_their_chinese(error):
    assert error.zh and not english_words(error.zh, set()), error.zh
    assert not CJK.search(str(error))


def test_load_failures_and_exception_places_in_chinese():
    timeout = SubmissionLoadError({"type": "Timeout", "message": "while loading the file: no answer within 8 s"})
    assert _summary(timeout, True, None, "zh") == "加载文件时，8 秒内没有回答"
    assert worker_zh("while loading the file: no answer after 60 s (an infinite loop?)", "超时") == \
        "加载文件时，60 秒后仍没有回答（是否有死循环？）"
    raised = StudentError({"type": "ValueError", "message": "bad shape", "where": "line 12, in causal_mask"})
    assert _summary(raised, True, {"causal_mask"}, "zh") == "ValueError: bad shape（causal_mask 第 12 行）"
    assert _summary(raised, True, {"causal_mask"}) == "ValueError: bad shape (line 12, in causal_mask)"
    assert _summary(raised, False, {"causal_mask"}, "zh") == "ValueError（causal_mask 第 12 行）"
    custom = StudentError({"type": "MyError", "message": "secret", "where": "line 3, in helper"})
    assert _summary(custom, False, {"causal_mask"}) == "an exception"
    assert _summary(custom, False, {"causal_mask"}, "zh") == ""


@pytest.mark.parametrize("note", ["on time", "late; no penalty policy", "2.0 h late: -10 %",
                                  "3.5 days late: -30 % (timestamps CSV)", "credit 50 % at 2026-11-21T10:00:00+08:00",
                                  "no submission time known: no late penalty applied",
                                  "marked late by the LMS, but no submission time is known: no late penalty applied",
                                  "a note from a future policy"])
def test_late_notes_in_chinese(note):
    text = late_text({"submitted_at": "2026-11-21T10:00:00+08:00", "due": "2026-11-20T23:59:00+08:00", "note": note,
                      "penalty": 2.0, "raw_score": 18.0})
    assert_one_language(text, set(), note)
    assert note in text.en
    assert late_note_zh("on time") == "按时提交"
