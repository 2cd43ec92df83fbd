"""nbgrader grade cells for the isolated engine (plain nbformat, no nbgrader import): the locked autograded cell
the release adds per graded function, and the outputs the autograde step writes into it."""
from __future__ import annotations

from nbformat import v4
from nbformat.notebooknode import NotebookNode

from autograder.report.feedback import num

GRADE_ID_PREFIX = "autograded_"


def grade_id(function: str) -> str:
    return GRADE_ID_PREFIX + function


def cell_source(function: str, points: float) -> str:
    """What an autograded cell holds: a comment only (no test code, nothing hidden)."""
    pts = num(points)
    return (f"# 自动评分：{function}（{pts} 分）由隔离评分程序在沙箱中评出；本单元不含测试代码，请勿修改。\n"
            f"# Autograded: {function} ({pts} points) is scored by the isolated grader in a sandbox; "
            "this cell holds no test code. Do not edit it.")


def grade_cell(function: str, points: float) -> NotebookNode:
    """A locked nbgrader grade cell for one graded function."""
    pts = int(points) if float(points).is_integer() else points
    meta = {"nbgrader": {"grade": True, "solution": False, "locked": True, "points": pts,
                         "grade_id": grade_id(function), "schema_version": 3}}
    return v4.new_code_cell(cell_source(function, points), metadata=meta, id=f"autograded-{function}")


def autograded_function(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    gid = meta.get("grade_id", "")
    if cell.get("cell_type") == "code" and meta.get("grade") and gid.startswith(GRADE_ID_PREFIX):
        return gid[len(GRADE_ID_PREFIX):]
    return None


def score_outputs(feedback: str, earned: float) -> list[NotebookNode]:
    return [v4.new_output("stream", name="stdout", text=feedback),
            v4.new_output("execute_result", data={"text/plain": repr(float(earned))}, execution_count=None)]
