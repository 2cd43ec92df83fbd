"""`autograder check`: the public checks on the student's own file, in-process, offline, in zh or en.

The student's file runs in this process through the grader's own worker code (`autograder.sandbox.worker.Worker`,
without the sandbox around it), and every call goes through the same wire encoding as in grading. The checks run
through `autograder.engine.runner.run_check`, so statuses, messages and diagnoses are the grader's own; only the
hidden checks and the isolation are left out. The output is a table per graded function; the exit code is 0 only
when every public check passes.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LANGS = ("zh", "en")
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
LOAD_SECONDS, CALL_SECONDS = 60.0, 10.0    # generous: this is the student's machine, the timeouts only stop hangs
GRADING_ENV = "AUTOGRADER_GRADING"         # notebooks skip their heavy demo cells when this is set

# (zh, en) of every sentence this command prints.
TEXT = {
    "title": ("公开测试", "Public tests"),
    "subset": ("公开测试是正式评分 {total} 项检查中的 {public} 项", "the public tests are {public} of the {total} graded checks"),
    "checked": ("检查的文件", "checked"),
    "other_form": ("（要检查另一个文件，请运行 autograder check {other}）", "(to check the other file: autograder check {other})"),
    "col_status": ("结果", "result"),
    "col_test": ("测试", "test"),
    "why": ("原因", "why"),
    "hint": ("提示", "hint"),
    "all_passed": ("全部 {n} 项公开测试通过。", "All {n} public tests passed."),
    "honest": ("公开测试已全部通过；隐藏测试会检查更多内容（{topics}），请按作业约定自己多试几种形状。",
               "Public tests passed; hidden tests will check more ({topics}): try more shapes yourself, following "
               "the contract."),
    "some_passed": ("{k}/{n} 项公开测试通过。", "{k} of {n} public tests passed."),
    "todo_left": ("还没完成的 TODO：{todos}", "TODOs still to do: {todos}"),
    "fix": ("修改后再运行一次 autograder check。", "Fix the above, then run autograder check again."),
    "load_failed": ("你的文件无法运行：{error}", "Your file failed to run: {error}"),
    "stops_at_todo": ("你的文件在加载时就停在了一个还没完成的 TODO 处（{where}）：顶层代码调用了还没写完的函数。"
                      "先完成它，或把这个调用放进 `if __name__ == \"__main__\":`。",
                      "Your file stops at an unfinished TODO while it loads ({where}): top-level code calls a "
                      "function that is not done yet. Finish it, or move that call under "
                      "`if __name__ == \"__main__\":`."),
    "output_tail": ("你的代码打印的最后几行：", "The last lines your code printed:"),
    "no_file": ("找不到要检查的文件：{path}（应为 {names} 之一，或包含它们的文件夹）",
                "Nothing to check at {path} (expected {names}, or a folder holding one of them)"),
    "not_found": ("{path} 中没有可检查的文件：{reason_zh}", "Nothing to check in {path}: {reason_en}"),
    "unknown": ("{error}", "{error}"),
    "bad_lang": ("--lang 只能是 zh 或 en，而不是 {value!r}", "--lang must be zh or en, not {value!r}"),
    "unreadable": ("无法检查 {name}：{error_zh}", "Cannot check {name}: {error_en}"),
    "plot_saved": ("图已保存：{path}", "Picture saved: {path}"),
    "no_plots": ("这个作业没有可画的图（--plot 不起作用）。", "This assignment has no pictures to draw (--plot does nothing)."),
    "plot_failed": ("无法画图：{error}", "Could not draw the picture: {error}"),
}
STYLE = {"passed": "green", "failed": "red", "not_implemented": "yellow", "error": "red", "timeout": "red",
         "crashed": "red", "forbidden": "red", "not_graded": "dim"}
MARK = {"passed": "✔", "not_implemented": "…"}
TODO_ID = re.compile(r"TODO\((\w+)\)")


class UsageError(Exception):
    def __init__(self, key: str, **fields):
        super().__init__(key)
        self.key, self.fields = key, fields


def say(lang: str, key: str, **fields) -> str:
    zh, en = TEXT[key]
    return (zh if lang == "zh" else en).format(**fields)


# -- the student's file in this process ---------------------------------------------------------------------------
class _CallTimeout(BaseException):
    """Raised inside student code by the alarm; a BaseException so that `except Exception` cannot swallow it."""


@contextlib.contextmanager
def _deadline(seconds: float):
    """Interrupt the block after `seconds` (POSIX main thread only; elsewhere there is no timeout)."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum, frame):
        raise _CallTimeout(f"no answer after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class LocalSession:
    """The `Session` of `autograder.engine.student`, served by a worker living in this very process."""

    def __init__(self, submission):
        from autograder.sandbox.worker import Worker
        from autograder.engine.student import SubmissionLoadError

        self.submission = submission
        self.worker = Worker(None, output_excerpt=4000)
        self.printed = io.StringIO()          # what the student's code prints stays out of the table
        self.load_error = None
        self.todo_messages: dict[str, str] = {}
        before = os.environ.get(GRADING_ENV)
        if submission.notebook:
            os.environ[GRADING_ENV] = "1"      # as in grading: the notebook skips its training and plotting cells
        try:
            cells = [c.encode("utf-8") for c in submission.cells]
            reply, _ = self._handle({"op": "load", "filename": submission.filename, "notebook": submission.notebook,
                                     "cells": [len(c) for c in cells]},
                                    [submission.source.encode("utf-8"), b"".join(cells)], LOAD_SECONDS)
        finally:
            if before is None:
                os.environ.pop(GRADING_ENV, None)
            else:
                os.environ[GRADING_ENV] = before
        if not reply.get("ok"):
            error = dict(reply.get("error") or {})
            if error.get("type") == _CallTimeout.__name__:
                error = {"type": "Timeout", "message": f"while loading the file: {error.get('message')} "
                                                       "(an infinite loop?)"}
            self.load_error = SubmissionLoadError(error)

    @property
    def module(self):
        return self.worker.module

    @property
    def output(self) -> str:
        return self.printed.getvalue()

    def _handle(self, header: dict, blobs: list[bytes], seconds: float):
        with contextlib.redirect_stdout(self.printed), contextlib.redirect_stderr(self.printed), \
                _deadline(seconds):
            return self.worker.handle(header, blobs)

    def request(self, header: dict, blobs: list[bytes]):
        """Same contract as `Session.request`: a Reply, or StudentError / ForbiddenAPIUsed / WorkerTimeout."""
        from autograder.engine.student import REFUSAL, ForbiddenAPIUsed, Reply, StudentError
        from autograder.sandbox import wire
        from autograder.sandbox.client import WorkerCrashed, WorkerTimeout

        if self.load_error is not None:
            raise self.load_error
        reply, out = self._handle(header, blobs, CALL_SECONDS)
        error = reply.get("error") or {}
        if error.get("type") == _CallTimeout.__name__:
            raise WorkerTimeout(error.get("message", ""))
        if not reply.get("ok"):
            failure = StudentError(error)
            if refused := REFUSAL.match(failure.message):
                raise ForbiddenAPIUsed([refused.group(1)])
            if failure.todo and failure.todo != "?":
                self.todo_messages.setdefault(failure.todo, failure.message)
            raise failure
        try:
            value = wire.decode(reply.get("value"), out)
        except wire.WireError as e:
            raise WorkerCrashed(f"invalid reply: {e}") from None
        if not isinstance(value, dict):
            raise WorkerCrashed("invalid reply")
        return Reply(value.get("result"), value.get("grads"), value.get("again"))


class LocalStudent:
    """The grader's `student` fixture for a file on this machine, with RemoteStudent's interface:
    `student.NAME(*args)`, `student.call(NAME, *args, grad_of=..., grad_output=..., return_args=...)` -> Reply,
    `student.new(NAME, *args)` -> an object to call and `.load_parameters(dict)`. Backed by a LocalSession."""

    def __init__(self, session: LocalSession):
        from autograder.engine.student import RemoteStudent

        self._local = session
        self._proxy = RemoteStudent(session)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._proxy, name)


def load_student(path: Path, functions: tuple[str, ...]) -> tuple[LocalStudent, LocalSession]:
    """Read the file as the grader does (`submission.load`: notebooks flattened, magics neutralised) and run it."""
    from autograder.engine.submission import load

    session = LocalSession(load(path, set(functions)))
    return LocalStudent(session), session


# -- finding the file, the language, the hints --------------------------------------------------------------------
def find_submission(path: Path, names: tuple[str, ...], assignment: str | None = None) -> tuple[Path, Path | None]:
    """(file to check, another candidate of the other form if there is one: the hint names it).

    A file is checked as given. In a folder, the file grading would choose (`autograder.engine.resolve`): the
    release ships both forms, and the one the student changed (different from the hashes in `manifest.json`) is
    checked, the module form when both changed."""
    from autograder.engine.resolve import resolve

    path = Path(path)
    if path.is_file():
        return path, None
    if not path.is_dir():
        raise UsageError("no_file", path=str(path), names=", ".join(names))
    found = resolve(path, tuple(names), assignment)
    if found.path is None:
        raise UsageError("not_found", path=str(path), reason_en=found.reason_en, reason_zh=found.reason_zh)
    return found.path, found.other_form()


def assignment_config(assignment: str) -> dict:
    """assignments/<id>/assignment.toml when this installation carries the source; {} otherwise."""
    path = REPO_ROOT / "assignments" / assignment / "assignment.toml"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def resolve_lang(lang: str | None, config: dict) -> str:
    chosen = (lang or config.get("default_lang") or "zh").strip().lower()
    if chosen not in LANGS:
        raise UsageError("bad_lang", value=lang)
    return chosen


def hint_for(todo: str, lang: str, config: dict, messages: dict[str, str]) -> str:
    """The TODO's hint: from assignment.toml, else from the stub's own message `TODO(id): <en> / <zh>`."""
    entry = config.get("todos", {}).get(todo, {})
    if entry.get(lang):
        return entry[lang]
    message = messages.get(todo, "")
    body = message.split(":", 1)[1].strip() if ":" in message else ""
    if " / " in body:
        en, zh = body.rsplit(" / ", 1)
        return zh if lang == "zh" else en
    return body


def remaining_todos(source: str) -> list[str]:
    """TODO ids of the stubs still in the source: a `raise NotImplementedError("TODO...")` line and the
    `# TODO(id)` comments just above it (the notebook stub carries the id only in those comments)."""
    lines = source.splitlines()
    found: list[str] = []
    for number, line in enumerate(lines):
        if "NotImplementedError" not in line or "TODO" not in line or line.lstrip().startswith("#"):
            continue
        ids = TODO_ID.findall(line)
        back = number - 1
        while not ids and back >= 0 and lines[back].lstrip().startswith("#"):
            ids = TODO_ID.findall(lines[back])
            back -= 1
        for todo in ids:
            if todo not in found:
                found.append(todo)
    return found


# -- running the public checks ------------------------------------------------------------------------------------
@dataclass
class Outcome:
    file: Path
    other: Path | None
    results: list            # CheckResult, in suite order
    total_checks: int        # public + hidden
    load_error: object       # StudentError or None
    output: str
    todos: list[str]         # TODO ids not done yet


def run_public(path: Path, other: Path | None, assignment: str):
    """Load the file, run every public check (forbidden APIs and stopped functions handled as in grading)."""
    from autograder.engine.checks import load_suite
    from autograder.engine.runner import run_checks
    from autograder.engine.submission import SubmissionError

    full = load_suite(assignment)
    try:
        student, session = load_student(path, full.spec.functions)
    except SubmissionError as e:  # unreadable, not UTF-8, a syntax error...: the grader could not run it either
        raise UsageError("unreadable", name=Path(path).name, error_zh=e.text.zh, error_en=e.text.en) from None
    results = run_checks(full.public(), session.submission, student, {})   # public checks take no references
    todos = []
    for r in results:
        for todo in TODO_ID.findall(r.detail_en) if r.status == "not_implemented" else []:
            if todo != "?" and todo not in todos:
                todos.append(todo)
    if session.load_error is not None and session.load_error.type == "NotImplementedError":
        todos = remaining_todos(session.submission.source)
    outcome = Outcome(path, other, results, len(full.checks), session.load_error, session.output, todos)
    return outcome, session


# -- printing -----------------------------------------------------------------------------------------------------
def _label(status: str, lang: str) -> str:
    from autograder.report.feedback import STATUS

    return f"{MARK.get(status, '✘')} {STATUS[status].pick(lang)}"


def render(console, outcome: Outcome, spec, lang: str, config: dict, todo_messages: dict[str, str]) -> None:
    from rich.table import Table
    from rich.text import Text

    en = lang == "en"
    n_public = len(outcome.results)
    head = f"{say(lang, 'title')} · {spec.title.pick(lang)}"
    console.print(Text(head, style="bold"), soft_wrap=True)
    console.print(f"{say(lang, 'checked')}: {outcome.file}  ({say(lang, 'subset', public=n_public, total=outcome.total_checks)})",
                  soft_wrap=True, markup=False)
    if outcome.other is not None:
        console.print(say(lang, "other_form", other=outcome.other.name), style="dim", soft_wrap=True, markup=False)

    if outcome.load_error is not None:
        err = outcome.load_error
        where = f" ({err.where})" if err.where else ""
        console.print()
        if err.type == "NotImplementedError":
            console.print(say(lang, "stops_at_todo", where=err.where or "?"), style="yellow", soft_wrap=True,
                          markup=False)
        else:
            said = f"{err.type}: {err.message[:300]}{where}"
            if lang == "zh":  # the grader's own words (a load that timed out) and "line N, in NAME" in Chinese
                from autograder.engine.runner import _summary

                said = _summary(err, True, None, "zh")
            console.print(say(lang, "load_failed", error=said), style="red",
                          soft_wrap=True, markup=False)
        tail = [line for line in outcome.output.splitlines() if line.strip()][-5:]
        if tail:
            console.print(say(lang, "output_tail"), style="dim")
            for line in tail:
                console.print("  " + line[:200], style="dim", markup=False, soft_wrap=True)

    from autograder.report.feedback import Part, line

    shown: list[str] = []     # TODO ids whose hint is already printed
    lines = [line(r) for r in outcome.results]
    for part in (Part(f, tuple(x for x in lines if x.function == f)) for f in dict.fromkeys(x.function for x in lines)):
        function, results = part.function, part.lines
        passed = sum(r.passed for r in results)
        overall = ("passed" if passed == len(results) else
                   "not_implemented" if all(r.status == "not_implemented" for r in results) else "failed")
        table = Table(title=Text.assemble((function, "bold"), f"  {passed}/{len(results)}  ",
                                          (_label(overall, lang), STYLE[overall])),
                      title_justify="left", show_lines=False, expand=True, padding=(0, 1))
        table.add_column(say(lang, "col_status"), no_wrap=True, min_width=12)
        table.add_column(say(lang, "col_test"), ratio=1)
        for r in results:
            cell = Text(r.title.pick(lang))
            detail = r.detail.pick(lang)
            if r.status == "not_implemented" and TODO_ID.findall(r.detail.en) == [function]:
                detail = ""  # the status says it, and the hint below the table says what to do
            if outcome.load_error is not None:
                detail = ""  # every row failed for the one reason printed above the tables
            if not r.passed and detail:
                cell.append("\n" + detail, style="dim")
            if r.diagnosis_text is not None:
                cell.append(f"\n{say(lang, 'why')}: ", style="bold yellow")
                cell.append(r.diagnosis_text.pick(lang), style="yellow")
            table.add_row(Text(_label(r.status, lang), style=STYLE.get(r.status, "red")), cell)
        console.print()
        console.print(table)
        for r in results:
            for todo in TODO_ID.findall(r.detail.en) if r.status == "not_implemented" else []:
                if todo in shown or todo == "?":
                    continue
                shown.append(todo)
                hint = hint_for(todo, lang, config, todo_messages)
                console.print(Text.assemble((f"  {say(lang, 'hint')} TODO({todo}): ", "bold yellow"), hint),
                              soft_wrap=True)

    console.print()
    passed = sum(r.status == "passed" for r in outcome.results)
    if passed == n_public and outcome.load_error is None:
        console.print(f"✔ {say(lang, 'all_passed', n=n_public)}", style="bold green", soft_wrap=True,
                      markup=False)
        console.print(say(lang, "honest", topics=spec.hidden_topics.pick(lang)), soft_wrap=True, markup=False)
    else:
        console.print(f"✘ {say(lang, 'some_passed', k=passed, n=n_public)}", style="bold red",
                      soft_wrap=True, markup=False)
        if outcome.todos:
            todos = ", ".join(f"TODO({t})" for t in outcome.todos)
            console.print(say(lang, "todo_left", todos=todos), style="yellow", soft_wrap=True, markup=False)
            for todo in outcome.todos if outcome.load_error is not None else []:
                hint = hint_for(todo, lang, config, todo_messages)
                if hint:
                    console.print(Text.assemble((f"  {say(lang, 'hint')} TODO({todo}): ", "bold yellow"), hint),
                                  soft_wrap=True)
        console.print(say(lang, "fix"), soft_wrap=True, markup=False)


# -- the command --------------------------------------------------------------------------------------------------
def which_assignment(path: Path, assignment: str | None) -> str:
    """The assignment named, else the one the folder's release or its file names are for; a UsageError saying
    what was found otherwise."""
    from autograder.assignments import UnknownAssignment, discover, get, infer
    from autograder.engine.resolve import resolve

    try:
        return get(assignment).id if assignment else infer(Path(path)).id
    except UnknownAssignment as e:
        names = tuple(n for spec in discover().values() for n in spec.submission_files)
        if assignment or not Path(path).is_dir():
            raise UsageError("unknown", error=str(e)) if assignment or Path(path).exists() else \
                UsageError("no_file", path=str(path), names=", ".join(names)) from None
        found = resolve(Path(path), names)
        if found.path is None:
            raise UsageError("not_found", path=str(path), reason_en=found.reason_en, reason_zh=found.reason_zh) from None
        raise UsageError("unknown", error=str(e)) from None


def run_check_command(path: Path, lang: str | None, plot: bool, assignment: str | None) -> int:
    """Exit code: 0 every public check passed, 1 otherwise, 2 usage error (no file, bad --lang)."""
    from rich.console import Console

    try:
        assignment = which_assignment(path, assignment)
    except UsageError as e:
        Console(stderr=True, highlight=False).print(
            f"error: {say('en', e.key, **e.fields)} / {say('zh', e.key, **e.fields)}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    config = assignment_config(assignment)
    console = Console(highlight=False)
    errors = Console(stderr=True, highlight=False)
    try:
        lang = resolve_lang(lang, config)
    except UsageError as e:
        errors.print(f"error: {say('en', e.key, **e.fields)} / {say('zh', e.key, **e.fields)}", markup=False,
                     soft_wrap=True)
        return EXIT_USAGE
    from autograder.engine.submission import skip_iri_grammar

    skip_iri_grammar()
    try:
        from autograder.engine.checks import load_suite

        from autograder.sandbox import forbid

        suite = load_suite(assignment)
        forbid.disable(list(suite.forbidden))  # as in grading: the ready-made APIs raise in this process from now on
        names = suite.submission_files
        file, other = find_submission(Path(path), tuple(names), assignment)
        outcome, session = run_public(file, other, assignment)
    except UsageError as e:
        if e.key == "unreadable":  # the student's file is there but cannot run: a failure to fix, not a usage error
            console.print(f"✘ {say(lang, e.key, **e.fields)}", style="bold red", markup=False, soft_wrap=True)
            return EXIT_FAILED
        errors.print(f"error: {say(lang, e.key, **e.fields)}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    render(console, outcome, suite.spec, lang, config, session.todo_messages)
    plots = suite.spec.part("plots") if plot else None
    if plot and plots is None:
        console.print(say(lang, "no_plots"), soft_wrap=True, markup=False)
    elif plots is not None:
        try:
            saved = plots.save_check_plot(session, Path(file).resolve().parent / f"{assignment}_check.png", lang)
            console.print(say(lang, "plot_saved", path=saved), soft_wrap=True, markup=False)
        except Exception as e:  # a picture must never hide the test results
            said = getattr(e, "text", None)   # the plots' own reason, in both languages; else the error's type (zh)
            error = said.pick(lang) if hasattr(said, "pick") else \
                f"{type(e).__name__}: {e}" if lang == "en" else type(e).__name__
            console.print(say(lang, "plot_failed", error=error), style="red", soft_wrap=True,
                          markup=False)
    passed = outcome.load_error is None and all(r.status == "passed" for r in outcome.results)
    return EXIT_OK if passed else EXIT_FAILED
