"""`# @include <file>: NAME[, NAME...]` notebook cells -> the exact source of top-level defs/classes."""
from __future__ import annotations

import ast
import re

from .errors import ReleaseError

DIRECTIVE_RE = re.compile(r"^#[ \t]*@include[ \t]+(?P<file>[^:\s]+)[ \t]*:[ \t]*(?P<names>.*?)[ \t]*$")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_directive(source: str, path: str, line: int | None) -> tuple[str, list[str]] | None:
    """(file, names) if the cell is an include directive, else None; a malformed directive is an error."""
    if "@include" not in source:
        return None
    match = DIRECTIVE_RE.match(source.strip())
    if match is None:
        raise ReleaseError("an @include cell must hold only '# @include <file>: NAME[, NAME...]'", path, line)
    names = [name.strip() for name in match["names"].split(",")]
    if not names or not all(NAME_RE.fullmatch(name) for name in names):
        raise ReleaseError(f"bad name list in {source.strip()!r}", path, line)
    return match["file"], names


def _end_with_comments(lines: list[str], end: int) -> int:
    """Extend a def's last line over the indented comments that follow it (e.g. a closing `### END SOLUTION`)."""
    last = end
    for number in range(end + 1, len(lines) + 1):
        line = lines[number - 1]
        if not line.strip():
            continue
        if line[0] in " \t" and line.lstrip().startswith("#"):
            last = number
        else:
            break
    return last


def extract(text: str, names: list[str], file: str, path: str, line: int | None) -> str:
    """Exact source of the named top-level defs/classes of `text` (decorators included), two blank lines apart."""
    tree = ast.parse(text, filename=file)
    lines = text.split("\n")
    spans = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans[node.name] = (start, _end_with_comments(lines, node.end_lineno))
    parts = []
    for name in names:
        if name not in spans:
            raise ReleaseError(f"@include {file}: no top-level def or class named {name!r}", path, line)
        start, end = spans[name]
        parts.append("\n".join(lines[start - 1:end]))
    return "\n\n\n".join(parts)
