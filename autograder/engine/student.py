"""The `student` fixture: the submission's API as seen from the grader.

`student.softmax(x)` sends the call to the sandboxed worker and returns what came back, rebuilt as plain
values. A worker that crashes, hangs or is killed is replaced for the next check, so one broken function cannot cost
the points of another.

Every reply is hostile input (the worker's harness shares a process with student code): `Session.request`
validates its structure, caps every string (`MAX_TEXT`) and list, and keeps only what the checks compare
themselves — the function's results. Nothing the worker says about itself decides a score.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass

import torch

from autograder.public.errors import StudentError, SubmissionLoadError, error_summary, text  # noqa: F401
from autograder.sandbox import forbid, wire
from autograder.sandbox.client import Sandbox, Worker, WorkerCrashed, WorkerTimeout
from autograder.sandbox.limits import Limits

from .submission import Submission

MAX_RESTARTS = 25  # a sanity cap: the runner already stops calling a function after it hung or crashed once
MAX_CELL_ERRORS = 20
REFUSAL = re.compile(r"^(\S{1,200}) " + re.escape(forbid.REFUSED))


class ForbiddenAPIUsed(Exception):
    """The student's code ran into a disabled API (the refusal's own error, raised where the student called it)."""

    def __init__(self, apis: list[str]):
        self.apis = apis
        super().__init__(", ".join(apis))


@dataclass
class Reply:
    value: object
    grads: object = None   # a list with one entry (tensor or None) per requested input, or {"error": ...}
    again: object = None   # the result of the second call on the same argument objects (`repeat=2`)


class Session:
    """One submission's live worker (respawned on demand) and the deadline for the whole submission.

    Output is kept in two parts: what was printed while loading and during public checks (`output`, shown to the
    student) and what was printed after `start_hidden()` (`hidden_output`, for staff only: hidden inputs must not
    reach students through their own prints)."""

    def __init__(self, sandbox: Sandbox, submission: Submission, limits: Limits):
        self.sandbox, self.submission, self.limits = sandbox, submission, limits
        self.deadline = time.monotonic() + limits.total_seconds
        self.worker: Worker | None = None
        self.restarts = 0
        self.load_error: StudentError | None = None
        self.cell_errors: list[dict] = []  # notebook cells that raised while the notebook ran
        self.output = ""
        self.hidden_output = ""
        self.hidden = False
        self._public_size = 0  # bytes of the current worker's output that belong to the public part

    def remaining(self, cap: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WorkerTimeout(f"the submission used its whole {self.limits.total_seconds:g} s budget")
        return min(cap, left)

    def _worker(self) -> Worker:
        if self.load_error is not None:
            raise self.load_error
        if self.worker is not None and not self.worker.dead:
            return self.worker
        if self.worker is not None:
            if self.restarts >= MAX_RESTARTS:
                raise WorkerCrashed(f"the worker was restarted {MAX_RESTARTS} times; giving up on this submission")
            self.restarts += 1
        self.worker = self.sandbox.spawn()
        self._public_size = 0
        sub = self.submission
        cells = [c.encode("utf-8") for c in sub.cells]
        header = {"op": "load", "filename": sub.filename, "notebook": sub.notebook, "cells": [len(c) for c in cells]}
        try:
            reply, _ = self.worker.request(header, [sub.source.encode("utf-8"), b"".join(cells)],
                                           timeout=self.remaining(self.limits.load_seconds))
        except (WorkerTimeout, WorkerCrashed) as e:
            kind = "Timeout" if isinstance(e, WorkerTimeout) else "Crash"
            self.load_error = SubmissionLoadError({"type": kind, "message": f"while loading the file: {e}"})
            raise self.load_error from None
        if reply.get("ok") is not True:
            self.collect_output()
            self.load_error = SubmissionLoadError(reply.get("error"))
            raise self.load_error
        errors = reply.get("cell_errors")
        errors = errors[:MAX_CELL_ERRORS] if isinstance(errors, list) else []
        self.cell_errors = [{"cell": e.get("cell") if type(e.get("cell")) is int else "?", **error_summary(e)}
                            for e in errors if isinstance(e, dict)]
        return self.worker

    def request(self, header: dict, blobs: list[bytes]) -> Reply:
        worker = self._worker()
        reply, out = worker.request(header, blobs, timeout=self.remaining(self.limits.call_seconds))
        if reply.get("ok") is not True:
            error = StudentError(reply.get("error"))
            if refused := REFUSAL.match(error.message):
                raise ForbiddenAPIUsed([refused.group(1)])
            raise error
        try:
            value = wire.decode(reply.get("value"), out)
        except (wire.WireError, RecursionError) as e:
            worker.kill()
            raise WorkerCrashed(f"invalid reply: {str(e)[:200]}") from None
        if not isinstance(value, dict):
            worker.kill()
            raise WorkerCrashed("invalid reply")
        return Reply(value.get("result"), value.get("grads"), value.get("again"))

    def start_hidden(self) -> None:
        """From now on, what the submission prints is for staff only."""
        if not self.hidden:
            self.collect_output()
            self.hidden = True

    def collect_output(self) -> None:
        """Add what the live worker printed since the last collection to the public or the hidden part."""
        if self.worker is None or self.worker.dead:
            return
        offset = self._public_size if self.hidden else 0
        try:
            header, _ = self.worker.request({"op": "output", "offset": offset}, timeout=2)
        except (WorkerTimeout, WorkerCrashed):
            return
        printed, size = text(header.get("text"), self.limits.output_excerpt), header.get("size")
        if self.hidden:
            self.hidden_output = (self.hidden_output + printed)[: self.limits.output_excerpt]
        else:
            self.output = printed
            self._public_size = size if type(size) is int and size >= 0 else 0

    def close(self) -> None:
        self.collect_output()
        cells = "".join(f"[cell {e['cell']}] {e['type']}: {e['message'][:200]}\n" for e in self.cell_errors)
        self.output = (cells + self.output)[: self.limits.output_excerpt]
        if self.worker is not None:
            self.worker.kill()


class RemoteObject:
    """An object living in the worker (e.g. the student's nn.Module): call it, set its parameters."""

    def __init__(self, session: Session, handle: wire.Handle):
        self.session, self.handle = session, handle

    def __call__(self, *args, **kwargs):
        return self.call(*args, **kwargs).value

    def call(self, *args, grad_of=(), grad_output: int = 0, repeat: int = 1, **kwargs) -> Reply:
        """Call the object, with the options of `RemoteStudent.call` (gradients into `grad_of`, `repeat=2`)."""
        return _call(self.session, {"handle": self.handle.id, "method": "__call__"}, args, kwargs, grad_of,
                     grad_output, repeat)

    def load_parameters(self, params: dict) -> None:
        """Copy tensors into the module's parameters by name (`W_q.weight`, ...): no reliance on creation order."""
        tree, blobs = wire.encode(dict(params))
        self.session.request({"op": "set_params", "handle": self.handle.id, "kwargs": tree,
                              "args": {"list": []}}, blobs)


class RemoteStudent:
    """`student.NAME(*args)` calls NAME in the submission; `student.new(NAME, *args)` builds an object there."""

    def __init__(self, session: Session):
        self._session = session

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: _send(self._session, "call", name, args, kwargs).value

    def call(self, name: str, *args, grad_of=(), grad_output: int = 0, repeat: int = 1, **kwargs) -> Reply:
        """A call that can also backpropagate (into args `grad_of`), or be made twice on the same argument objects
        (`repeat=2`: `Reply.again`). Gradients come back validated: exactly one per `grad_of` entry, each None or
        a tensor of that input's shape and dtype (else the reply is refused as invalid)."""
        return _call(self._session, name, args, kwargs, grad_of, grad_output, repeat)

    def new(self, name: str, *args, **kwargs) -> RemoteObject:
        handle = _send(self._session, "new", name, args, kwargs).value
        if not isinstance(handle, wire.Handle):
            raise StudentError({"type": "TypeError", "message": f"{name}(...) did not build an object"})
        return RemoteObject(self._session, handle)


def _call(session: Session, target, args: tuple, kwargs: dict, grad_of, grad_output: int, repeat: int) -> Reply:
    reply = _send(session, "call", target, args, kwargs, grad_of=list(grad_of), grad_output=grad_output,
                  repeat=repeat)
    if grad_of and not isinstance(reply.grads, dict):
        reply.grads = _valid_grads(reply.grads, [args[i] for i in grad_of])
    if grad_of and isinstance(reply.grads, dict):
        reply.grads = {"error": error_summary(reply.grads.get("error"))}
    return reply


def _valid_grads(grads, inputs: list) -> list:
    """One gradient per input, each None or a plain tensor of that input's shape and dtype; anything else is a
    malformed reply (a short or padded list cannot make a missing gradient pass)."""
    if not isinstance(grads, list) or len(grads) != len(inputs):
        raise StudentError({"type": "InvalidReply", "message": "the gradients reply does not have one entry per input"})
    for grad, x in zip(grads, inputs):
        if grad is not None and (type(grad) is not torch.Tensor or grad.shape != x.shape or grad.dtype != x.dtype):
            raise StudentError({"type": "InvalidReply", "message": "a gradient has the wrong type, shape or dtype"})
    return grads


def _send(session: Session, op: str, target, args: tuple, kwargs: dict, **options) -> Reply:
    (args_tree, kwargs_tree), blobs = _encode_pair(list(args), kwargs)
    return session.request({"op": op, "target": target, "args": args_tree, "kwargs": kwargs_tree, **options}, blobs)


def _encode_pair(args: list, kwargs: dict):
    tree, blobs = wire.encode((args, kwargs))
    args_tree, kwargs_tree = tree["tuple"]
    return (args_tree, kwargs_tree), blobs
