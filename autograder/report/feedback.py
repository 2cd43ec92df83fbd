"""The one feedback model: what a student is told about one graded submission, built once from its result and
rendered by every output — the Markdown and HTML feedback (templates/feedback.*.j2), Gradescope's results.json
(`gradescope_json`), the text of nbgrader and otter cells (`plain_lines`) and the terminal of `autograder check`.

    fb = feedback(result)
    fb.lines                  # every check in suite order: title, status (word and icon), points, detail, diagnosis
    fb.parts                  # the same, per graded function, with its points and its distinct diagnoses
    fb.problems               # the parts that lost points
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from autograder.engine.results import CheckResult, SubmissionResult
from autograder.public.status import ICON, STATUS  # noqa: F401
from autograder.public.text import Text

HIDDEN = Text(zh="隐藏测试", en="hidden test")


@dataclass(frozen=True)
class Line:
    """One check, in words."""
    name: str
    function: str
    visibility: str
    status: str
    score: float
    max_score: float
    title: Text                      # what the check is about
    detail: Text                     # what went wrong (empty when passed)
    diagnosis: str | None            # id of the recognised mistake
    diagnosis_text: Text | None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def status_text(self) -> Text:
        return STATUS[self.status]

    @property
    def icon(self) -> str:
        return ICON[self.status]


@dataclass(frozen=True)
class Part:
    """The checks of one graded function."""
    function: str
    lines: tuple[Line, ...]

    @property
    def score(self) -> float:
        return sum(line.score for line in self.lines)

    @property
    def max_score(self) -> float:
        return sum(line.max_score for line in self.lines)

    @property
    def failed(self) -> tuple[Line, ...]:
        return tuple(line for line in self.lines if not line.passed)

    @property
    def diagnoses(self) -> dict[str, Text]:
        """The distinct diagnoses of its failed checks, in check order (each said once)."""
        found: dict[str, Text] = {}
        for line in self.failed:
            if line.diagnosis:
                found.setdefault(line.diagnosis, line.diagnosis_text)
        return found


@dataclass(frozen=True)
class Feedback:
    student: str
    assignment: str
    file: str | None
    score: float
    max_score: float
    error: Text | None               # why the submission could not be graded at all
    lines: tuple[Line, ...]
    output: str                      # what it printed while loading and in public checks (never hidden ones)
    seconds: float = 0.0
    isolation: str = ""
    overrides: tuple[Text, ...] = ()  # the course staff's changes, in words
    late: Text | None = None          # the late policy's verdict, when the course has one

    @property
    def parts(self) -> tuple[Part, ...]:
        functions = list(dict.fromkeys(line.function for line in self.lines))
        return tuple(Part(f, tuple(line for line in self.lines if line.function == f)) for f in functions)

    @property
    def problems(self) -> tuple[Part, ...]:
        return tuple(part for part in self.parts if part.failed)

    def part(self, function: str) -> Part:
        return next((p for p in self.parts if p.function == function), Part(function, ()))


def line(check: CheckResult) -> Line:
    return Line(check.name, check.function, check.visibility, check.status, check.score, check.max_score,
                Text(zh=check.zh, en=check.en), Text(zh=check.detail_zh, en=check.detail_en), check.diagnosis,
                Text(zh=check.diagnosis_zh, en=check.diagnosis_en) if check.diagnosis else None)


def feedback(result: SubmissionResult) -> Feedback:
    error = Text(zh=result.error_zh, en=result.error_en) if result.error_en else None
    return Feedback(result.student, result.assignment, result.file, result.score, result.max_score, error,
                    tuple(line(c) for c in result.checks), result.output, result.seconds, result.isolation,
                    tuple(override_text(o) for o in result.overrides), late_text(result.late))


# The late policy's verdicts (classroom/late.py, classroom/gradebook.py write them in English) and where the time
# came from (classroom/times.py), in Chinese; a note not listed here is left out of the Chinese text.
LATE_NOTES_ZH = (
    (re.compile(r"on time"), "按时提交"),
    (re.compile(r"late; no penalty policy"), "迟交；没有迟交扣分规则"),
    (re.compile(r"no submission time known: no late penalty applied"), "不知道提交时间：不扣迟交分"),
    (re.compile(r"marked late by the LMS, but no submission time is known: no late penalty applied"),
     "教学平台标记为迟交，但不知道提交时间：不扣迟交分"),
    (re.compile(r"credit ([\d.]+) % at (\S+)"), "{1} 提交，按 {0} % 计分"),
    (re.compile(r"([\d.]+) h late: -([\d.]+) %"), "迟交 {0} 小时：扣 {1} %"),
    (re.compile(r"([\d.]+) days late: -([\d.]+) %"), "迟交 {0} 天：扣 {1} %"),
)
TIME_SOURCES_ZH = {"timestamps CSV": "时间戳 CSV", "timestamp.txt": "timestamp.txt",
                   "timestamp.txt unreadable": "timestamp.txt 无法读取",
                   "Gradescope submission_metadata.yml": "Gradescope submission_metadata.yml",
                   "Gradescope submission_metadata.yml: no time": "Gradescope submission_metadata.yml：没有时间",
                   "Blackboard name": "Blackboard 下载文件名"}


def late_note_zh(note: str) -> str:
    """The Chinese of a late verdict's note ("2.0 h late: -10 %", optionally followed by " (its time source)")."""
    source = re.fullmatch(r"(.*) \((.+)\)", note)
    for text in ([note] if source is None else [note, source.group(1)]):
        for pattern, zh in LATE_NOTES_ZH:
            if m := pattern.fullmatch(text):
                said = zh.format(*m.groups())
                if text is not note and source.group(2) in TIME_SOURCES_ZH:
                    said += f"（{TIME_SOURCES_ZH[source.group(2)]}）"
                return said
    return ""


def late_text(late: dict) -> Text | None:
    if not late:
        return None
    when = late["submitted_at"] or "?"
    note_zh = late_note_zh(late["note"])
    return Text(zh=f"提交时间 {when}，截止 {late['due']}{'：' + note_zh if note_zh else ''}；扣 "
                   f"{num(late['penalty'])} 分（原始得分 {num(late['raw_score'])}）",
                en=f"submitted {when}, due {late['due']}: {late['note']}; penalty {num(late['penalty'])} (raw score "
                   f"{num(late['raw_score'])})")


def override_text(change: dict) -> Text:
    """One override in words: who changed what to which score, when and why."""
    zh_what = f"检查 {change['check']}" if change["check"] else "总分"
    en_what = f"check {change['check']}" if change["check"] else "the total"
    zh_score = f" 改为 {num(change['score'])} 分" if change["score"] is not None else "（评语）"
    en_score = f" set to {num(change['score'])}" if change["score"] is not None else " (a comment)"
    return Text(zh=f"{change['author']} 于 {change['made_at']} 调整：{zh_what}{zh_score}。{change['comment']}",
                en=f"{change['author']} on {change['made_at']}: {en_what}{en_score}. {change['comment']}")


def num(x: float) -> str:
    """1.0 -> '1', 0.5 -> '0.5'."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# -- plain text (nbgrader and otter cells, Gradescope) ----------------------------------------------------------
def plain_lines(check: Line) -> list[str]:
    """One check in both languages: icon, status word, points, what it tests; what went wrong and the diagnosis
    when it failed."""
    hidden = f" [{HIDDEN.both}]" if check.visibility == "hidden" else ""
    lines = [f"{check.icon} {check.status_text.both} · {check.name}{hidden} ({num(check.score)}/{num(check.max_score)}):"
             f" {check.title.both}"]
    if not check.passed:
        lines += [f"    {text}" for text in (check.detail.zh, check.detail.en) if text]
        if check.diagnosis_text is not None:
            lines += [f"    {text}" for text in (check.diagnosis_text.zh, check.diagnosis_text.en) if text]
    return lines


def summary(fb: Feedback) -> str:
    """Overall score line, plus the reason when the submission could not be graded at all."""
    text = f"总分 / total: {num(fb.score)}/{num(fb.max_score)}"
    if fb.error is not None:
        text += f"\n{fb.error.zh}\n{fb.error.en}"
    return text


def gradescope_json(fb: Feedback, hidden_visibility: str = "after_published") -> dict:
    """Gradescope's results.json: overall score and output, one entry per check (feedback text in zh + en)."""
    tests = []
    for check in fb.lines:
        parts = [f"{check.icon} {check.status_text.both} · {check.title.both}"]
        if not check.passed:
            parts.append(f"{check.detail.zh}\n{check.detail.en}".strip())
        if check.diagnosis_text is not None:
            parts.append(f"{check.diagnosis_text.zh}\n{check.diagnosis_text.en}")
        tests.append({"name": check.name, "score": check.score, "max_score": check.max_score,
                      "status": "passed" if check.passed else "failed", "output": "\n".join(p for p in parts if p),
                      "visibility": "visible" if check.visibility == "public" else hidden_visibility})
    output = "\n".join(([f"{fb.error.zh}\n{fb.error.en}"] if fb.error is not None else []) +
                       ([f"{fb.late.zh}\n{fb.late.en}"] if fb.late is not None else []) +
                       [f"{o.zh}\n{o.en}" for o in fb.overrides])
    return {"score": fb.score, "output": output, "execution_time": round(fb.seconds, 3), "tests": tests,
            "extra_data": {"isolation": fb.isolation}}
