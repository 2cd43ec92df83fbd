"""Read and validate `assignments/<id>/assignment.toml`: what only the release needs (version, the TODO hints, the
handout and notebook sources). Names, title and graded functions come from the one spec,
`autograder/assignments/<id>/spec.py`, and may not be repeated here."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import ReleaseError


@dataclass(frozen=True)
class Spec:
    """Everything the release needs to know about one assignment."""

    root: Path
    id: str
    version: str
    module: str                 # graded module file, the only .py file allowed to hold solution regions
    notebook: str | None        # generated notebook name (None: no notebook form)
    notebook_source: str        # jupytext percent source of the notebook
    handout: str                # Jinja2 template of the student README
    todos: dict[str, dict[str, str]]
    data: dict                  # the whole toml, as Jinja2 context for the handout

    @property
    def folder(self) -> Path:
        return self.root / "assignments" / self.id

    def rel(self, path: Path) -> str:
        """Path relative to the repository root, with forward slashes (used in messages and manifests)."""
        return path.relative_to(self.root).as_posix()

    def hint(self, todo: str) -> tuple[str, str]:
        """(zh, en) hint of a todo id."""
        return self.todos[todo]["zh"], self.todos[todo]["en"]


def _line_of(text: str, pattern: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if re.search(pattern, line):
            return number
    return None


def load_spec(root: Path, assignment: str) -> Spec:
    """Load the assignment's toml; raise ReleaseError with the toml's line on anything missing or malformed."""
    root = root.resolve()
    path = root / "assignments" / assignment / "assignment.toml"
    rel = path.relative_to(root).as_posix()
    if not path.is_file():
        raise ReleaseError(f"no such assignment: {assignment!r} (missing assignment.toml)", rel)
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ReleaseError(f"invalid TOML: {exc}", rel) from None
    for key in ("id", "version"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ReleaseError(f"missing string key {key!r}", rel)
    if data["id"] != assignment:
        raise ReleaseError(f"id = {data['id']!r} does not match the folder name {assignment!r}",
                           rel, _line_of(text, r"^\s*id\s*="))
    repeated = [key for key in ("module", "notebook", "title") if key in data]
    if repeated:
        raise ReleaseError(f"{', '.join(repeated)}: set in autograder/assignments/{assignment}/spec.py, not here",
                           rel, _line_of(text, rf"^\s*\[?{repeated[0]}\b"))
    from autograder.assignments import UnknownAssignment, get

    try:
        assignment_spec = get(assignment)
    except UnknownAssignment:
        raise ReleaseError(f"no autograder/assignments/{assignment}/spec.py for this assignment", rel) from None
    data = {**data, "module": assignment_spec.module, "notebook": assignment_spec.notebook,
            "title": {"zh": assignment_spec.title.zh, "en": assignment_spec.title.en}}
    todos = data.get("todos", {})
    for todo, hint in todos.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", todo):
            raise ReleaseError(f"todo id {todo!r} is not an identifier", rel, _line_of(text, re.escape(todo)))
        for lang in ("zh", "en"):
            if not isinstance(hint.get(lang), str) or not hint[lang].strip():
                raise ReleaseError(f"[todos.{todo}] needs a non-empty {lang!r} hint",
                                   rel, _line_of(text, rf"^\s*\[todos\.{todo}\]"))
    return Spec(
        root=root, id=data["id"], version=data["version"], module=data["module"],
        notebook=data.get("notebook"), notebook_source=data.get("notebook_source", "notebook.py"),
        handout=data.get("handout", "handout.md"), todos=todos, data=data,
    )


def todo_line(spec: Spec, todo: str) -> int | None:
    """Line of `[todos.<todo>]` in assignment.toml (for error messages)."""
    text = (spec.folder / "assignment.toml").read_text(encoding="utf-8")
    return _line_of(text, rf"^\s*\[todos\.{re.escape(todo)}\]")
