"""nbgrader's autograde step, with scores from the isolated engine instead of the student's kernel.

nbgrader_config.py puts `GradeInSandbox` where nbgrader's `Execute` was in `Autograde.autograde_preprocessors`. It
grades the sanitized notebook (locked cells already restored from the source) in the sandbox and writes into each
autograded grade cell (`autograded_<function>`, added by `autograder release`) a stdout stream with the bilingual
feedback and an `execute_result` holding the points earned; nbgrader's `SaveAutoGrades` then records them
(`utils.determine_grade` reads a numeric execute_result as partial credit). Student code never runs in nbgrader's
process or kernel, so patched comparisons, printed warnings or a killed kernel cannot change a score.
"""
from __future__ import annotations

import copy
import os
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode
from traitlets import Unicode

from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.assignments import discover
from autograder.report.feedback import Feedback, feedback, num, plain_lines

from . import grading
from .nbgrader_cells import autograded_function, grade_cell, score_outputs


class GradeInSandbox(NbGraderPreprocessor):
    """Replaces nbgrader's `Execute`: grade in the sandbox, write each autograded cell's feedback and points."""

    assignment = Unicode("", help="Assignment to grade with (default: nbgrader's assignment name when it is one, "
                         "else the one the notebook's name is for).").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict):
        info = resources.get("nbgrader", {})
        student = info.get("student") or "student"
        notebook = f"{info.get('notebook') or 'submission'}.ipynb"
        named = info.get("assignment") if info.get("assignment") in discover() else None  # nbgrader's own name
        assignment = grading.assignment_for(self.assignment or named, Path(notebook))
        suite = grading.suite_for(assignment)
        points = suite.points_by_function
        present = {autograded_function(c) for c in nb.cells} - {None}
        for function in points:  # a deleted grade cell would record nothing: put it back, so it scores too
            if function not in present:
                nb.cells.append(grade_cell(function, points[function]))
        for cell in nb.cells:
            if autograded_function(cell):
                cell.outputs = []
        source = _without_outputs(nb)
        self.log.info("Grading %s of %s in the sandbox", notebook, student)
        # nbgrader runs in the course root: the course secret is kept there (course_secret, beside gradebook.db)
        result = grading.grade_text(source, notebook, assignment, student, secrets=[os.getcwd()],
                                    course=Path(os.getcwd()))
        self.log.info("%s: %s/%s (isolated engine)", student, num(result.score), num(result.max_score))
        fb = feedback(result)
        for cell in nb.cells:
            function = autograded_function(cell)
            if function is not None:
                cell.outputs = score_outputs(function_feedback(fb, function), fb.part(function).score)
                cell.execution_count = None
        resources.setdefault("autograder", {})["result"] = result.to_dict()
        return nb, resources


def _without_outputs(nb: NotebookNode) -> str:
    """The notebook as the engine reads it: every code cell, no outputs."""
    clean = copy.deepcopy(nb)
    for cell in clean.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nbformat.writes(clean)


def function_feedback(fb: Feedback, function: str) -> str:
    """The text of one autograded cell: the function's points and every one of its checks, in zh and en."""
    part = fb.part(function)
    lines = [f"{function}: {num(part.score)}/{num(part.max_score)} 分 / points — 由隔离评分程序评出 / scored by "
             "the isolated grader"]
    if fb.error is not None:
        lines += [f"    {fb.error.zh}", f"    {fb.error.en}"]
    for line in part.lines:
        lines += plain_lines(line)
    return "\n".join(lines) + "\n"
