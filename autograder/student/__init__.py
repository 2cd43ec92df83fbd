"""The student's side: `autograder check` runs the public checks on the student's own file, in-process and offline
(`check.py`), and `--plot` draws their attention next to the expected pattern (`plots.py`, the only user of
matplotlib). No sandbox: it is the student's own code on the student's own machine."""
