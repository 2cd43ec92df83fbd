"""The one error type of the release step."""
from __future__ import annotations


class ReleaseError(Exception):
    """A problem in the assignment source, shown as `file:line: message` (exit code 2)."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        super().__init__(message)
        self.message, self.path, self.line = message, path, line

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"
