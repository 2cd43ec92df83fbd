"""otter-grader plugin: `otter run` (or otter's Gradescope runner) with scores from the isolated engine.

Listed in the autograder zip's otter_config.json (`"plugins": ["autograder.integrations.otter.IsolatedGrader"]`,
config `{"assignment": "<id>"}`, written by the release). Otter executes the submission in a kernel and unpickles what that
kernel wrote, so the student's code must never reach it:

- `before_grading`: drop a submitted `.OTTER_LOG` (otter would unpickle it) and turn off log grading and PDFs;
- `before_execution`: grade the real submission file in the sandbox (timeouts included, so an infinite loop ends as
  a timeout result) and hand otter a replacement notebook holding no student code;
- `after_grading`: replace otter's results by the engine's: one test file per graded function, one test case per
  check (hidden checks marked hidden), scores set with `update_score`.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
from otter.plugins import AbstractOtterPlugin
from otter.test_files.abstract_test import TestCase, TestCaseResult
from otter.test_files.exception_test import ExceptionTestFile

from autograder.report.feedback import feedback, plain_lines, summary

from . import grading

OTTER_LOG = ".OTTER_LOG"
REPLACEMENT_NOTE = ("# 提交的代码已在隔离沙箱中评分，这里不运行任何学生代码。\n"
                    "# The submission was graded in the isolated sandbox; no student code runs here.\n")


class IsolatedGrader(AbstractOtterPlugin):
    """Grade in the sandbox before otter executes anything; report the engine's scores through otter."""

    result = None

    @property
    def assignment(self) -> str:
        config = self.plugin_config if isinstance(self.plugin_config, dict) else {}
        return grading.assignment_for(config.get("assignment"), Path(self.submission_path))

    def before_grading(self, config):
        log = Path(self.submission_path).with_name(OTTER_LOG)
        if log.is_file() or log.is_symlink():
            log.unlink()
        config.grade_from_log = False
        config.pdf = False
        config.token = None

    def before_execution(self, submission):
        path = Path(self.submission_path)
        root = path.parent.parent  # otter's autograder folder: source (tests), submission, results
        student = os.environ.get("AUTOGRADER_STUDENT", path.stem)
        # the secret: $AUTOGRADER_COURSE_SECRET, or a course_secret file added to the otter zip (source/); `otter run`
        # unpacks into a fresh temporary folder, so nothing written there would survive for a regrade
        seed = grading.seed_for(self.assignment, grading.gradescope_submitter(root) or student,
                                shipped=root / "source" / "course_secret")
        self.result = grading.grade_path(path, self.assignment, student, secrets=[str(root)], seed=seed)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(REPLACEMENT_NOTE)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        return nb

    def after_grading(self, results):
        if self.result is None:  # before_execution never ran: grade now, still in the sandbox
            self.before_execution(None)
        fb = feedback(self.result)
        suite = grading.suite_for(self.assignment)
        results.clear_results()
        results._catastrophic_error = None  # otter's own run of the replacement notebook is not the submission
        for function in suite.points_by_function:
            results.results[function] = _test_file(fb, function)
            results.update_score(function, fb.part(function).score)
        results.set_output(summary(fb))

    def generate_report(self):
        if self.result is None:
            return ""
        return "isolated engine / 隔离评分: " + summary(feedback(self.result))


def _test_file(fb, function: str) -> ExceptionTestFile:
    cases, outcomes = [], []
    for check in fb.part(function).lines:
        case = TestCase(name=check.name, body="", hidden=check.visibility == "hidden", points=check.max_score,
                        success_message=None, failure_message=None)
        cases.append(case)
        outcomes.append(TestCaseResult(test_case=case, message="\n".join(plain_lines(check)), passed=check.passed))
    test_file = ExceptionTestFile(function, "", cases, all_or_nothing=False)
    test_file.test_case_results = outcomes
    return test_file
