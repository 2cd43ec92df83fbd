"""Instructor-only grading material, one package per assignment: `checks.py` (public and hidden checks),
`cases.py` (each student's hidden inputs and how their references are computed from the solution), `diagnosis.py`
(known mistakes), `reference_solution.py` (the clean solution, written by `autograder release`). Never released to
students."""


def spec(assignment: str):
    """The assignment's torch-free `spec` module (SUBMISSION_FILES, FORBIDDEN): readable before torch is imported."""
    import importlib

    return importlib.import_module(f"{__name__}.{assignment}.spec")
