"""Where scores are computed. Runs in the grader's own process, which holds the hidden checks and references and
never runs student code: student functions are reached through `student.RemoteStudent`, backed by a sandboxed
worker, and every value that comes back is a plain tensor rebuilt from bytes.
"""
import torch as _torch

# The grader computes on tiny tensors (references, comparisons, diagnoses) from several grading threads: torch's
# intra-op threads only add start-up and spin time there, and take CPU from the workers. One thread per caller.
_torch.set_num_threads(1)
