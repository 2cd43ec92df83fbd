"""What a check sees when student code raises: `StudentError` (type, message, where: capped strings), raised by
the sandboxed student proxy in the grader and by the in-process one in the released checker alike."""
from __future__ import annotations

import re

MAX_TEXT = 2000   # characters kept of any string about an error (messages, type names, where)
TODO = re.compile(r"TODO\((\w+)\)")
WHERE = re.compile(r"\bin (\w+)$")  # "line 12, in softmax"


def text(value, cap: int = MAX_TEXT) -> str:
    """A string from untrusted code: a str (anything else becomes ""), at most `cap` characters."""
    return value[:cap] if isinstance(value, str) else ""


def error_summary(value) -> dict:
    """An error description, validated: type, message and where, each a capped string."""
    value = value if isinstance(value, dict) else {}
    return {"type": text(value.get("type"), 100) or "Exception", "message": text(value.get("message")),
            "where": text(value.get("where"), 200)}


class StudentError(Exception):
    """Student code raised; carries its summary (type, message, where). A check that recognises why may set
    `diagnosis` (an `expect.Diagnosis`) before re-raising it."""

    diagnosis = None

    def __init__(self, error: dict):
        error = error_summary(error)
        self.type, self.message, self.where = error["type"], error["message"], error["where"]
        super().__init__(f"{self.type}: {self.message}")

    @property
    def todo(self) -> str | None:
        """The TODO id when this is an unfinished stub: named in the message (`TODO(softmax): ...`), else the
        function that raised it (nbgrader's notebook stub carries no id), else "?"."""
        if self.type == "NotImplementedError":
            match = TODO.search(self.message) or WHERE.search(self.where)
            return match.group(1) if match else "?"
        return None


class SubmissionLoadError(StudentError):
    """The submission itself failed to run (exception, exit or crash at import)."""
