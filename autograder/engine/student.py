"""The `student` fixture: the submission's API as seen from the grader.

`student.causal_mask(4)` sends the call to the sandboxed worker and returns what came back, rebuilt as plain
values. A worker that crashes, hangs or is killed is replaced for the next check, so one broken function cannot cost
the points of another.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass

from autograder.sandbox import wire
from autograder.sandbox.client import Sandbox, Worker, WorkerCrashed, WorkerTimeout
from autograder.sandbox.limits import Limits

from .submission import Submission

MAX_RESTARTS = 25  # a sanity cap: the runner already stops calling a function after it hung or crashed once
TODO = re.compile(r"TODO\((\w+)\)")
WHERE = re.compile(r"\bin (\w+)$")  # the worker's "line 12, in causal_mask"


class StudentError(Exception):
    """Student code raised; carries the worker's summary (type, message, where). A check that recognises why may
    set `diagnosis` (an `expect.Diagnosis`) before re-raising it."""

    diagnosis = None

    def __init__(self, error: dict):
        self.type = str(error.get("type", "Exception"))
        self.message = str(error.get("message", ""))
        self.where = str(error.get("where", ""))
        super().__init__(f"{self.type}: {self.message}")

    @property
    def todo(self) -> str | None:
        """The TODO id when this is an unfinished stub: named in the message (`TODO(causal_mask): ...`), else the
        function that raised it (nbgrader's notebook stub carries no id), else "?"."""
        if self.type == "NotImplementedError":
            match = TODO.search(self.message) or WHERE.search(self.where)
            return match.group(1) if match else "?"
        return None


class SubmissionLoadError(StudentError):
    """The submission itself failed to run (exception, exit or crash at import)."""


class ForbiddenAPIUsed(Exception):
    def __init__(self, apis: list[str]):
        self.apis = apis
        super().__init__(", ".join(apis))


@dataclass
class Reply:
    value: object
    grads: object = None
    args_after: object = None


class Session:
    """One submission's live worker (respawned on demand) and the deadline for the whole submission."""

    def __init__(self, sandbox: Sandbox, submission: Submission, forbidden: list[str], limits: Limits):
        self.sandbox, self.submission, self.forbidden, self.limits = sandbox, submission, forbidden, limits
        self.deadline = time.monotonic() + limits.total_seconds
        self.worker: Worker | None = None
        self.restarts = 0
        self.load_error: StudentError | None = None
        self.cell_errors: list[dict] = []  # notebook cells that raised while the notebook ran
        self.output = ""

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
        try:
            header, _ = self.worker.request(
                {"op": "load", "source": self.submission.source, "filename": self.submission.filename,
                 "notebook": self.submission.notebook, "cells": list(self.submission.cells),
                 "forbidden": self.forbidden},
                timeout=self.remaining(self.limits.load_seconds))
        except (WorkerTimeout, WorkerCrashed) as e:
            kind = "Timeout" if isinstance(e, WorkerTimeout) else "Crash"
            self.load_error = SubmissionLoadError({"type": kind, "message": f"while loading the file: {e}"})
            raise self.load_error from None
        if not header.get("ok"):
            self.collect_output()
            self.load_error = SubmissionLoadError(header.get("error", {}))
            raise self.load_error
        self.cell_errors = [e for e in header.get("cell_errors", []) if isinstance(e, dict)][:20]
        return self.worker

    def request(self, header: dict, blobs: list[bytes]) -> Reply:
        worker = self._worker()
        reply, out = worker.request(header, blobs, timeout=self.remaining(self.limits.call_seconds))
        if reply.get("forbidden"):
            raise ForbiddenAPIUsed(list(reply["forbidden"]))
        if not reply.get("ok"):
            raise StudentError(reply.get("error", {}))
        try:
            value = wire.decode(reply.get("value"), out)
        except wire.WireError as e:
            worker.kill()
            raise WorkerCrashed(f"invalid reply: {e}") from None
        if not isinstance(value, dict):
            worker.kill()
            raise WorkerCrashed("invalid reply")
        return Reply(value.get("result"), value.get("grads"), value.get("args_after"))

    def collect_output(self) -> None:
        """Keep an excerpt of what the submission printed (asked from the live worker, if any)."""
        if self.worker is None or self.worker.dead:
            return
        try:
            header, _ = self.worker.request({"op": "output"}, timeout=2)
            self.output = str(header.get("text", ""))[: self.limits.output_excerpt]
        except (WorkerTimeout, WorkerCrashed):
            pass

    def close(self) -> None:
        self.collect_output()
        cells = "".join(f"[cell {e.get('cell')}] {e.get('type')}: {str(e.get('message'))[:200]}\n"
                        for e in self.cell_errors)
        self.output = (cells + self.output)[: self.limits.output_excerpt]
        if self.worker is not None:
            self.worker.kill()


class RemoteObject:
    """An object living in the worker (e.g. the student's MultiHeadAttention): call it, set its parameters."""

    def __init__(self, session: Session, handle: wire.Handle):
        self.session, self.handle = session, handle

    def __call__(self, *args, **kwargs):
        return _send(self.session, "call", {"handle": self.handle.id, "method": "__call__"}, args, kwargs).value

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

    def call(self, name: str, *args, grad_of=(), grad_output: int = 0, return_args: bool = False, **kwargs) -> Reply:
        """A call that can also backpropagate (into args `grad_of`) and return the args as they are afterwards."""
        return _send(self._session, "call", name, args, kwargs, grad_of=list(grad_of), grad_output=grad_output,
                     return_args=return_args)

    def new(self, name: str, *args, **kwargs) -> RemoteObject:
        handle = _send(self._session, "new", name, args, kwargs).value
        if not isinstance(handle, wire.Handle):
            raise StudentError({"type": "TypeError", "message": f"{name}(...) did not build an object"})
        return RemoteObject(self._session, handle)


def _send(session: Session, op: str, target, args: tuple, kwargs: dict, **options) -> Reply:
    (args_tree, kwargs_tree), blobs = _encode_pair(list(args), kwargs)
    return session.request({"op": op, "target": target, "args": args_tree, "kwargs": kwargs_tree, **options}, blobs)


def _encode_pair(args: list, kwargs: dict):
    tree, blobs = wire.encode((args, kwargs))
    args_tree, kwargs_tree = tree["tuple"]
    return (args_tree, kwargs_tree), blobs
