"""Results of grading: per check and per submission, and their Gradescope `results.json` form."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

STATUSES = ("passed", "failed", "error", "not_implemented", "timeout", "crashed", "forbidden", "not_graded")


@dataclass
class CheckResult:
    name: str
    function: str
    score: float
    max_score: float
    status: str                 # one of STATUSES
    visibility: str             # public | hidden
    zh: str                     # what the check is about
    en: str
    detail_zh: str = ""         # what went wrong, in words a student can act on (never expected values)
    detail_en: str = ""
    diagnosis: str | None = None  # id of a recognised mistake
    diagnosis_zh: str = ""
    diagnosis_en: str = ""
    seconds: float = 0.0


@dataclass
class SubmissionResult:
    student: str
    assignment: str
    file: str | None
    sha256: str | None
    score: float
    max_score: float
    checks: list[CheckResult] = field(default_factory=list)
    error_en: str = ""          # set when the submission could not be graded at all
    error_zh: str = ""
    output: str = ""            # excerpt of what the submission printed while loading and in public checks
    seconds: float = 0.0
    staff_output: str = ""      # what it printed during hidden checks: for the course staff, never in feedback
    isolation: str = ""         # the sandbox tier it ran in (autograder/sandbox/tiers.py): full | userns | landlock | none

    @property
    def graded(self) -> bool:
        return not self.error_en

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        data = dict(data)
        data["checks"] = [CheckResult(**c) for c in data.get("checks", [])]
        return cls(**data)


GRADESCOPE_VISIBILITY = {"public": "visible", "hidden": "after_published"}


def to_gradescope(result: SubmissionResult, hidden_visibility: str = "after_published") -> dict:
    """Gradescope's results.json: overall score and output, one entry per check (feedback text in zh + en)."""
    tests = []
    for c in result.checks:
        lines = [f"{c.zh} / {c.en}"]
        if c.status != "passed":
            lines.append(f"{c.detail_zh}\n{c.detail_en}".strip())
        if c.diagnosis:
            lines.append(f"{c.diagnosis_zh}\n{c.diagnosis_en}")
        tests.append({
            "name": c.name,
            "score": c.score,
            "max_score": c.max_score,
            "status": "passed" if c.status == "passed" else "failed",
            "output": "\n".join(x for x in lines if x),
            "visibility": "visible" if c.visibility == "public" else hidden_visibility,
        })
    output = f"{result.error_zh}\n{result.error_en}".strip() if result.error_en else ""
    return {"score": result.score, "output": output, "execution_time": round(result.seconds, 3), "tests": tests,
            "extra_data": {"isolation": result.isolation}}
