"""Results of grading: per check and per submission (stored in the gradebook; shown through report/feedback.py)."""
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
    overrides: list[dict] = field(default_factory=list)  # course staff's changes (classroom/gradebook.py), applied
    late: dict = field(default_factory=dict)  # the late policy's verdict: raw_score, penalty, submitted_at, due, note

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
