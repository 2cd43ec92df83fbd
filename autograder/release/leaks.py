"""Leak guard: no student file may hold a solution marker or a line found only inside solution regions."""
from __future__ import annotations

import json

from .markers import has_marker


def _key(line: str) -> str | None:
    """Comparable form of a line; None for lines too generic to be a leak (blank, only punctuation)."""
    stripped = line.strip()
    return stripped if any(ch.isalnum() for ch in stripped) else None


def secret_lines(inside: list[str], outside: list[str]) -> set[str]:
    """Lines that occur inside solution regions and nowhere else in the source."""
    public = {_key(line) for line in outside}
    return {key for key in map(_key, inside) if key is not None and key not in public}


def _text_lines(name: str, data: bytes) -> list[tuple[str, str]]:
    """(location, line) pairs of a student file; notebooks are read cell by cell."""
    text = data.decode("utf-8")
    if name.endswith(".ipynb"):
        cells = json.loads(text).get("cells", [])
        return [(f"{name}: cell {c}, line {n}", line)
                for c, cell in enumerate(cells, start=1)
                for n, line in enumerate("".join(cell.get("source", "")).split("\n"), start=1)]
    return [(f"{name}:{n}", line) for n, line in enumerate(text.split("\n"), start=1)]


def find_leaks(files: dict[str, bytes], secrets: set[str]) -> list[str]:
    """One message per leaked line in `files` (name -> bytes); empty when clean."""
    problems = []
    for name in sorted(files):
        found_before = len(problems)
        for where, line in _text_lines(name, files[name]):
            if has_marker(line):
                problems.append(f"{where}: solution marker in a student file: {line.strip()!r}")
            elif _key(line) in secrets:
                problems.append(f"{where}: solution line in a student file: {line.strip()!r}")
        if len(problems) == found_before and has_marker(files[name].decode("utf-8", "replace")):
            problems.append(f"{name}: solution marker in a student file (outside the cell sources)")
    return problems
