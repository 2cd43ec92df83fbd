"""The worker: runs one submission's source and answers the grader's calls. Lives only in a confined child.

Everything here is in reach of student code (it shares the process), so nothing here is trusted: the grader
validates every reply, and the worker holds nothing worth stealing (inputs only, never expected values).
"""
from __future__ import annotations

import builtins
import io
import os
import socket
import sys
import time
import traceback
import types

import torch

from . import frames, wire

SUBMISSION_NAME = "submission"


class Worker:
    def __init__(self, sock: socket.socket, output_excerpt: int):
        self.sock = sock
        self.module: types.ModuleType | None = None
        self.filename = ""
        self.handles: dict[int, object] = {}
        self.output_excerpt = output_excerpt
        self.output_path: str | None = None  # where fd 1 and 2 go, once redirect_output has run

    def load(self, source: str, filename: str, notebook: bool, cells: list[str] | None = None) -> dict:
        """Run the submission as a module. A .py file must import cleanly; a notebook runs like "Run All" with
        errors allowed: a cell that raises (an unfinished TODO called by a demo cell) is reported and the next
        cell still runs, so one unfinished function does not hide the others."""
        self.filename = filename
        module = types.ModuleType(SUBMISSION_NAME)
        module.__file__ = "/submission/" + filename
        if notebook:
            module.__dict__.update(display=_quiet, get_ipython=lambda: None)
        sys.modules[SUBMISSION_NAME] = module
        started = time.perf_counter()
        blocks = list(enumerate(cells, 1)) if notebook and cells else [(None, source)]
        cell_errors = []
        for number, block in blocks:
            try:
                exec(compile(block, filename, "exec", dont_inherit=True), module.__dict__)
            except BaseException as e:  # SystemExit and KeyboardInterrupt included
                if number is None:
                    return {"ok": False, "error": describe(e, filename)}
                cell_errors.append({"cell": number, **describe(e, filename)})
        self.module = module
        names = [n for n, v in module.__dict__.items() if callable(v) and not n.startswith("_")]
        return {"ok": True, "names": sorted(names), "cell_errors": cell_errors[:20],
                "seconds": time.perf_counter() - started}

    # -- requests ----------------------------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            try:
                header, blobs = frames.recv(self.sock, max_bytes=1 << 30)
            except (frames.WireError, OSError):
                return
            reply, out_blobs = self.handle(header, blobs)
            frames.send(self.sock, reply, out_blobs)

    def handle(self, header: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        op = header.get("op")
        if op == "load":  # blobs: the source, and a notebook's cells end to end (sizes in "cells"): never in JSON
            source, cells = blobs[0].decode("utf-8", "replace"), []
            if len(blobs) > 1:
                offsets = [0]
                for size in header.get("cells", []):
                    offsets.append(offsets[-1] + size)
                cells = [blobs[1][a:b].decode("utf-8", "replace") for a, b in zip(offsets, offsets[1:])]
            return self.load(source, header["filename"], header.get("notebook", False), cells), []
        if op == "output":
            return self.output(int(header.get("offset", 0))), []
        if self.module is None:
            return {"ok": False, "error": {"type": "NotLoaded", "message": "submission not loaded"}}, []
        try:
            args = wire.decode(header.get("args", {"list": []}), blobs)
            kwargs = wire.decode(header.get("kwargs", {"dict": {}}), blobs)
            if op == "call":
                result, extra = self.call(header, args, kwargs)
            elif op == "new":
                result, extra = self.new(header["target"], args, kwargs), {}
            elif op == "set_params":
                result, extra = self.set_params(header["handle"], kwargs), {}
            else:
                return {"ok": False, "error": {"type": "BadRequest", "message": f"unknown op {op!r}"}}, []
        except BaseException as e:
            return {"ok": False, "error": describe(e, self.filename)}, []
        tree, out_blobs = wire.encode({"result": result, **extra})
        return {"ok": True, "value": tree}, out_blobs

    def resolve(self, target):
        if isinstance(target, dict):  # {"handle": n, "method": name}
            obj = self.handles[target["handle"]]
            return getattr(obj, target.get("method", "__call__"))
        value = self.module.__dict__.get(target)
        if value is None:
            raise LookupError(f"your file does not define {target!r}")
        return value

    def call(self, header: dict, args: list, kwargs: dict):
        """Call the target; with ``repeat: 2`` call it again on the very same argument objects (``again``): a
        function that modifies its inputs shows it in its own second result, which the grader compares."""
        fn = self.resolve(header["target"])
        grad_of = header.get("grad_of") or []
        for i in grad_of:
            args[i].requires_grad_(True)
        result = fn(*args, **kwargs)
        extra = {}
        if header.get("repeat") == 2:
            extra["again"] = fn(*args, **kwargs)
        if grad_of:
            extra["grads"] = self.gradients(result, header.get("grad_output", 0), args, grad_of)
        if isinstance(result, torch.nn.Module):
            self.handles[len(self.handles)] = result
            result = wire.Handle(len(self.handles) - 1)
        return result, extra

    def gradients(self, result, index: int, args: list, grad_of: list[int]):
        """Backpropagate sum(output * w), w a fixed ramp so every element counts; return the grads of `grad_of`."""
        outputs = [t for t in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(t, torch.Tensor)]
        try:
            out = outputs[index]
            weight = wire.grad_ramp(out.shape, out.dtype)
            (out * weight).sum().backward()
        except Exception as e:
            return {"error": describe(e, self.filename)}
        return [args[i].grad for i in grad_of]

    def new(self, target: str, args: list, kwargs: dict):
        obj = self.resolve(target)(*args, **kwargs)
        self.handles[len(self.handles)] = obj
        return wire.Handle(len(self.handles) - 1)

    def set_params(self, handle: int, params: dict):
        module = self.handles[handle]
        with torch.no_grad():
            for name, value in params.items():
                param = module.get_parameter(name)
                if tuple(param.shape) != tuple(value.shape):
                    raise ValueError(f"{name} has shape {tuple(param.shape)}, expected {tuple(value.shape)}")
                param.copy_(value)
        return None

    def output(self, offset: int = 0) -> dict:
        """What the submission printed from byte `offset` on (an excerpt) and the total size so far."""
        sys.stdout.flush(), sys.stderr.flush()
        try:
            if self.output_path is None:
                raise OSError("output not captured")
            with open(self.output_path, "rb") as f:
                f.seek(max(0, offset))
                data = f.read(self.output_excerpt * 4)
                size = os.fstat(f.fileno()).st_size
        except OSError:
            data, size = b"", 0
        return {"ok": True, "text": data.decode("utf-8", "replace")[: self.output_excerpt], "size": size}


def _quiet(*args, **kwargs):
    return None


def describe(e: BaseException, filename: str) -> dict:
    """A short summary of an exception raised by student code: type, message, the submission's line (the grader
    re-validates and caps all of it: this runs beside student code)."""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename == filename or frame.filename.startswith("/submission/"):
            where = f"line {frame.lineno}, in {frame.name}"
            break
    try:
        message = str(e)[:500]
    except Exception:
        message = "<unprintable>"
    return {"type": type(e).__name__[:80], "message": message, "where": where}


class CappedOutput(io.TextIOBase):
    """sys.stdout / sys.stderr of a worker: keeps the first `cap` bytes in the output file, silently drops the
    rest, so printing a lot never fails the submission (and never fills the disk)."""

    def __init__(self, fd: int, shared: list[int], cap: int):
        self.fd, self.shared, self.cap = fd, shared, cap

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = self.cap - self.shared[0]
        if room > 0:
            data = text.encode("utf-8", "replace")[:room]
            try:
                os.write(self.fd, data)
            except OSError:
                pass
            self.shared[0] += len(data)
        return len(text)


def redirect_output(folder: str, cap: int) -> str:
    """Send fd 1 and 2 to a file in the private tmp `folder`; Python-level output is capped at `cap` bytes.
    Returns the file's path."""
    path = os.path.join(folder, ".autograder-output")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    written = [0]
    sys.stdout = CappedOutput(1, written, cap)
    sys.stderr = CappedOutput(2, written, cap)
    builtins.input = lambda *a, **k: ""
    return path
