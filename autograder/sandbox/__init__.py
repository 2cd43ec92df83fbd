"""Where student code runs.

The grader never runs student code in its own process. It starts one *zygote* per grading run: a process that
imports torch once, hides every course secret from its own view of the filesystem (`rootfs`), and then forks one
*worker* per submission. A worker is cut off further (`confine`: namespaces, limits, an unprivileged uid, a cgroup
placed by the grader) and only ever sees the submission's source and the inputs the grader sends it (`wire`).
Nothing in this package may import `autograder.engine` or `autograder.assignments`.
"""
