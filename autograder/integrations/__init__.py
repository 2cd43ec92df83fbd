"""nbgrader, otter-grader and Gradescope in front of the isolated engine: they collect, record and display;
every score comes from `autograder.engine` running the submission in the sandbox."""
