"""The public runtime: everything the released student checker needs, and nothing hidden.

`autograder release` copies this folder into `student_template/<id>/checker/` together with the chapter's
`public_checks.py` and `public_facts.json`; the grader imports the same modules (one `Text`, one `expect`, one
`check` decorator, one `StudentError`). Rules for code here: only torch and the standard library, relative imports
only, no hidden check, input, reference or solution line (tests/test_student_checker.py checks the release).

In a notebook:  from checker import Notebook; grader = Notebook(); grader.check("function_name")
In a terminal:  python check.py [file] [--lang en]
"""


def __getattr__(name: str):
    if name == "Notebook":
        from .cli import Notebook
        return Notebook
    raise AttributeError(name)
