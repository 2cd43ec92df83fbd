"""A notebook as Python: its code cells in order, each headed by its number, with the lines a plain interpreter
cannot run (IPython magics, shell escapes) or that would reach a grading tool (otter, the checker's `grader`)
neutralised. The grader's submission reader and the released checker read notebooks this one way."""
from __future__ import annotations

import re

NEUTRALISED = re.compile(r"^\s*([%!?]|import\s+otter\b|from\s+otter\b|import\s+checker\b|from\s+checker\b"
                         r"|grader\s*=\s*(otter\.|Notebook\()|grader\.\w+\()")


def neutralise(line: str) -> str:
    if NEUTRALISED.match(line):
        indent = line[: len(line) - len(line.lstrip())]
        return f"{indent}pass  # removed for grading: {line.strip()[:60]}"
    return line


def block(number: int, source: str) -> str:
    """One code cell (Jupyter's 1-based cell `number`) as Python."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        lines = ["# " + line for line in lines]  # a cell magic: the whole cell is not Python
    return f"# --- cell {number} ---\n" + "\n".join(neutralise(line) for line in lines) + "\n"


def code_blocks(cells: list) -> list[str]:
    """`cells`: the notebook's cells (dicts with cell_type and source, a str or a list of str)."""
    blocks = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        blocks.append(block(number, "".join(source) if isinstance(source, list) else str(source)))
    return blocks
