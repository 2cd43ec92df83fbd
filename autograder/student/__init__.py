"""The student's side: `autograder check` runs the public checks on the student's own file, in-process and offline
(`check.py`); `--plot` calls the assignment's own `plots.save_check_plot` when it has one. No sandbox: it is the
student's own code on the student's own machine."""
