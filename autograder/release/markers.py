"""Solution regions: parse `### BEGIN SOLUTION <todo-id>` / `### END SOLUTION` and rewrite them.

A text is handled as `text.split("\\n")`, so joining the lines back restores it byte for byte.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ReleaseError

MARKER_WORDS = ("BEGIN SOLUTION", "END SOLUTION")  # nbgrader's ClearSolutions matches these as substrings
BEGIN_RE = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION(?:[ \t]+(?P<todo>\S+))?[ \t]*$")
END_RE = re.compile(r"^(?P<indent>[ \t]*)### END SOLUTION[ \t]*$")


@dataclass(frozen=True)
class Region:
    """One solution region; `begin`/`end` are 0-based indices of its marker lines."""

    todo: str
    indent: str
    begin: int
    end: int


def has_marker(line: str) -> bool:
    return any(word in line for word in MARKER_WORDS)


def parse(text: str, path: str, todos: dict | None, forbidden: str | None = None) -> list[Region]:
    """Return the regions of `text`; raise ReleaseError(`path:line: ...`) on any malformed marker.

    `todos`: the known todo ids (None: don't check ids). `forbidden`: if set, any marker is an error with this reason.
    """
    regions: list[Region] = []
    open_: tuple[int, str, str] | None = None  # (line index, indent, todo)
    for index, line in enumerate(text.split("\n")):
        if not has_marker(line):
            continue
        where = (path, index + 1)
        if forbidden is not None:
            raise ReleaseError(f"solution marker not allowed here: {forbidden}", *where)
        begin, end = BEGIN_RE.match(line), END_RE.match(line)
        if begin:
            if open_ is not None:
                raise ReleaseError(f"nested BEGIN SOLUTION: the region opened at line {open_[0] + 1} "
                                   "has no END SOLUTION yet", *where)
            todo = begin["todo"]
            if todo is None:
                raise ReleaseError("BEGIN SOLUTION needs a todo id: '### BEGIN SOLUTION <todo-id>'", *where)
            if todos is not None and todo not in todos:
                known = ", ".join(sorted(todos)) or "none"
                raise ReleaseError(f"unknown todo id {todo!r}: add [todos.{todo}] to assignment.toml "
                                   f"(known: {known})", *where)
            open_ = (index, begin["indent"], todo)
        elif end:
            if open_ is None:
                raise ReleaseError("END SOLUTION without a matching BEGIN SOLUTION", *where)
            if end["indent"] != open_[1]:
                raise ReleaseError(f"END SOLUTION is indented differently from its BEGIN SOLUTION "
                                   f"at line {open_[0] + 1}", *where)
            if index == open_[0] + 1:
                raise ReleaseError(f"empty solution region {open_[2]!r}", *where)
            regions.append(Region(todo=open_[2], indent=open_[1], begin=open_[0], end=index))
            open_ = None
        else:
            raise ReleaseError(f"malformed marker {line.strip()!r}: expected '### BEGIN SOLUTION <todo-id>' "
                               "or '### END SOLUTION' alone on its line", *where)
    if open_ is not None:
        raise ReleaseError(f"BEGIN SOLUTION {open_[2]} has no matching END SOLUTION", path, open_[0] + 1)
    return regions


def _rewrite(text: str, regions: list[Region], begin, end, body) -> str:
    """Rebuild `text`, replacing each region's BEGIN line, END line and body lines by what the callbacks return."""
    lines = text.split("\n")
    out: list[str] = []
    cursor = 0
    for region in regions:
        out.extend(lines[cursor:region.begin])
        out.extend(begin(region))
        out.extend(body(region, lines[region.begin + 1:region.end]))
        out.extend(end(region))
        cursor = region.end + 1
    out.extend(lines[cursor:])
    return "\n".join(out)


def solution(text: str, regions: list[Region]) -> str:
    """Clean solution: marker lines removed, region bodies kept."""
    return _rewrite(text, regions, lambda r: [], lambda r: [], lambda r, body: body)


def todo_comments(todo: str, hint: tuple[str, str], indent: str) -> list[str]:
    """`# TODO(<id>): <zh>` then `# TODO(<id>): <en>` (one comment line per hint line)."""
    return [f"{indent}# TODO({todo}): {line}".rstrip() for text in hint for line in text.splitlines()]


def py_string(value: str) -> str:
    """A double-quoted Python literal of `value`, non-ASCII kept readable."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def stub_lines(todo: str, hint: tuple[str, str], indent: str) -> list[str]:
    """What a region becomes in the student module: the bilingual TODO comments and a NotImplementedError."""
    zh, en = hint
    message = py_string(f"TODO({todo}): {en} / {zh}")
    return todo_comments(todo, hint, indent) + [f"{indent}raise NotImplementedError({message})"]


def student(text: str, regions: list[Region], hints: dict[str, tuple[str, str]]) -> str:
    """Student module: every region (markers included) replaced by its stub, at the region's indentation."""
    return _rewrite(text, regions, lambda r: stub_lines(r.todo, hints[r.todo], r.indent),
                    lambda r: [], lambda r, body: [])


def nbgrader(text: str, regions: list[Region], hints: dict[str, tuple[str, str]]) -> str:
    """nbgrader source form: TODO comments, then plain `### BEGIN SOLUTION` / `### END SOLUTION` around the body."""
    return _rewrite(
        text, regions,
        lambda r: todo_comments(r.todo, hints[r.todo], r.indent) + [f"{r.indent}### BEGIN SOLUTION"],
        lambda r: [f"{r.indent}### END SOLUTION"],
        lambda r, body: body,
    )


def split_lines(text: str, regions: list[Region]) -> tuple[list[str], list[str]]:
    """(lines inside region bodies, lines outside any region), marker lines excluded."""
    lines = text.split("\n")
    inside_index = {i for r in regions for i in range(r.begin + 1, r.end)}
    markers = {i for r in regions for i in (r.begin, r.end)}
    inside = [lines[i] for i in sorted(inside_index)]
    outside = [line for i, line in enumerate(lines) if i not in inside_index and i not in markers]
    return inside, outside
