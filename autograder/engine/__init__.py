"""Where scores are computed. Runs in the grader's own process, which holds the hidden checks and references and
never runs student code: student functions are reached through `student.RemoteStudent`, backed by a sandboxed
worker, and every value that comes back is a plain tensor rebuilt from bytes.
"""
