"""The worker: runs one submission's source and answers the grader's calls. Lives only in a confined child.

Everything here is in reach of student code (it shares the process), so nothing here is trusted: the grader
validates every reply, and the worker holds nothing worth stealing (inputs only, never expected values).
"""
from __future__ import annotations

import builtins
import fnmatch
import functools
import io
import os
import re
import socket
import sys
import time
import traceback
import types

import torch
from torch.overrides import TorchFunctionMode

from . import frames, wire

SUBMISSION_NAME = "attention_submission"

class Worker:
    def __init__(self, sock: socket.socket, output_excerpt: int):
        self.sock = sock
        self.module: types.ModuleType | None = None
        self.handles: dict[int, object] = {}
        self.used_forbidden: list[str] = []
        self.op_patterns: list[str] = []
        self.blocked_ops = None  # the torch.library.Library whose kernels refuse forbidden aten ops
        self.output_excerpt = output_excerpt
        self.output_path: str | None = None  # where fd 1 and 2 go, once redirect_output has run

    # -- setup -------------------------------------------------------------------------------------------------
    def watch_forbidden(self, names: list[str]) -> None:
        """Record every use of a forbidden API. Python names (``"torch.nn.functional.scaled_dot_product_attention"``)
        are wrapped; op patterns (``"op:*scaled_dot_product*"``) are matched on every torch function called
        during a call (see OpRecorder), and from the first graded call on, the aten operators they match refuse to
        run (see `block_aten_ops`), so `torch.ops.aten...` reached through getattr tricks, with torch-function
        handling disabled, is caught too. Loading is not watched: the handout allows the ready-made API outside the
        graded functions (e.g. a self-check at import)."""
        import importlib

        self.op_patterns = [n for n in names if n.startswith("op:")]
        for qualname in (n for n in names if not n.startswith("op:")):
            owner_name, _, attr = qualname.rpartition(".")
            try:
                owner = importlib.import_module(owner_name)
            except ImportError:
                continue
            original = getattr(owner, attr, None)
            if original is None:
                continue
            if isinstance(original, type):
                recorder = self._recording_class(original, qualname)
            else:
                recorder = self._recording_function(original, qualname)
            setattr(owner, attr, recorder)

    def _recording_function(self, original, qualname):
        used = self.used_forbidden

        def recorder(*args, **kwargs):
            used.append(qualname)
            return original(*args, **kwargs)

        recorder.__name__ = getattr(original, "__name__", "forbidden")
        return recorder

    def _recording_class(self, original, qualname):
        used = self.used_forbidden

        class Recorder(original):
            def __init__(self, *args, **kwargs):
                used.append(qualname)
                super().__init__(*args, **kwargs)

        Recorder.__name__ = Recorder.__qualname__ = original.__name__
        return Recorder

    def load(self, source: str, filename: str, notebook: bool, cells: list[str] | None = None) -> dict:
        """Run the submission as a module. A .py file must import cleanly; a notebook runs like "Run All" with
        errors allowed: a cell that raises (an unfinished TODO called by a demo cell) is reported and the next
        cell still runs, so one unfinished function does not hide the others."""
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
                    return {"ok": False, "error": describe(e)}
                cell_errors.append({"cell": number, **describe(e)})
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
        if op == "load":
            self.watch_forbidden(header.get("forbidden", []))
            return self.load(header["source"], header["filename"], header.get("notebook", False),
                             header.get("cells")), []
        if op == "output":
            return self.output(), []
        if self.module is None:
            return {"ok": False, "error": {"type": "NotLoaded", "message": "submission not loaded"}}, []
        del self.used_forbidden[:]
        if self.blocked_ops is None and op in ("call", "new"):
            self.blocked_ops = block_aten_ops(self.op_patterns, self.used_forbidden)
        try:
            args = wire.decode(header.get("args", {"list": []}), blobs)
            kwargs = wire.decode(header.get("kwargs", {"dict": {}}), blobs)
            if op == "call":
                with OpRecorder(self.op_patterns, self.used_forbidden):
                    result, extra = self.call(header, args, kwargs)
            elif op == "new":
                with OpRecorder(self.op_patterns, self.used_forbidden):
                    result, extra = self.new(header["target"], args, kwargs), {}
            elif op == "set_params":
                result, extra = self.set_params(header["handle"], kwargs), {}
            else:
                return {"ok": False, "error": {"type": "BadRequest", "message": f"unknown op {op!r}"}}, []
        except BaseException as e:
            return {"ok": False, "error": describe(e), "forbidden": sorted(set(self.used_forbidden))}, []
        tree, out_blobs = wire.encode({"result": result, **extra})
        return {"ok": True, "value": tree, "forbidden": sorted(set(self.used_forbidden))}, out_blobs

    def resolve(self, target):
        if isinstance(target, dict):  # {"handle": n, "method": name}
            obj = self.handles[target["handle"]]
            return getattr(obj, target.get("method", "__call__"))
        value = self.module.__dict__.get(target)
        if value is None:
            raise LookupError(f"your file does not define {target!r}")
        return value

    def call(self, header: dict, args: list, kwargs: dict):
        fn = self.resolve(header["target"])
        grad_of = header.get("grad_of") or []
        for i in grad_of:
            args[i].requires_grad_(True)
        result = fn(*args, **kwargs)
        extra = {}
        if header.get("return_args"):
            extra["args_after"] = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
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
            return {"error": describe(e)}
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

    def output(self) -> dict:
        sys.stdout.flush(), sys.stderr.flush()
        try:
            if self.output_path is None:
                raise OSError("output not captured")
            with open(self.output_path, "rb") as f:
                data = f.read(self.output_excerpt * 4)
                size = os.fstat(f.fileno()).st_size
        except OSError:
            data, size = b"", 0
        return {"ok": True, "text": data.decode("utf-8", "replace")[: self.output_excerpt], "size": size}


KERNEL_KEYS = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CPU")


@functools.cache
def aten_op_lines() -> str:
    """Every registered aten operator as one ``name.overload`` per line (built once, in the zygote, before workers
    are forked: a single regex search over it is much cheaper than a loop over ~3000 names in every worker)."""
    return "\n".join(n[len("aten::"):] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))


def _glob_lines(glob: str) -> re.Pattern:
    """``*scaled_dot_product*`` -> matches whole lines whose operator name (before any ``.overload``) fits the glob
    (wildcards ``*`` and ``?``)."""
    name = "".join("[^\n.]*" if c == "*" else "[^\n.]" if c == "?" else re.escape(c) for c in glob)
    return re.compile(rf"^{name}(?:\.[^\n]*)?$", re.M)


def block_aten_ops(patterns: list[str], used: list[str]):
    """In the dispatcher, below every Python-level hook, replace the CPU kernels of each aten operator whose name
    matches an ``op:`` pattern by one that records the use and raises. No torch-function or dispatch mode switch
    bypasses it, and the original kernels are not reachable from Python. Returns the `torch.library.Library`
    holding the registrations (they last as long as it does: this worker's lifetime)."""
    import warnings

    library = torch.library.Library("aten", "IMPL")
    for pattern in patterns:
        for name in _glob_lines(pattern.removeprefix("op:")).findall(aten_op_lines()):
            for key in KERNEL_KEYS:
                if torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + name, key):
                    with warnings.catch_warnings():  # "overriding a previously registered kernel": the point
                        warnings.simplefilter("ignore")
                        library.impl(name, _refusing_kernel("aten::" + name, pattern, used), key)
    return library


def _refusing_kernel(qualified: str, pattern: str, used: list[str]):
    def refuse(*args, **kwargs):
        used.append(pattern)
        raise RuntimeError(f"{qualified} is not allowed in this assignment: implement it yourself")

    return refuse


class OpRecorder(TorchFunctionMode):
    """While active, records which `op:` patterns (``"op:*scaled_dot_product*"``) the torch functions called match.
    Torch-function modes see every torch API call from Python, `torch.ops.aten...` through getattr included."""

    def __init__(self, patterns: list[str], used: list[str]):
        super().__init__()
        self.patterns, self.used = [p.removeprefix("op:") for p in patterns], used

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "") or ""
        for pattern in self.patterns:
            if fnmatch.fnmatchcase(name, pattern):
                self.used.append("op:" + pattern)
        return func(*args, **(kwargs or {}))


def _quiet(*args, **kwargs):
    return None


def describe(e: BaseException) -> dict:
    """A short, safe summary of an exception raised by student code: type, message, the submission's line."""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename in ("attention.py", "attention.ipynb") or frame.filename.startswith("/submission/"):
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
