"""The student's own code, in this process: the `student` fixture of the public checks when a student runs them
(`python check.py`, or `grader.check(...)` in the notebook). Same interface as the grader's sandboxed proxy
(`student.NAME(*args)`, `student.new(NAME, *args)`, `.load_parameters(...)`): an exception from student code
becomes a `StudentError`; arguments are copies (a function that modifies its inputs cannot change the published
facts); results come back as plain tensors, detached."""
from __future__ import annotations

import json
import runpy
import traceback
from pathlib import Path

import torch

from .errors import StudentError
from .notebook import code_blocks


def _plain(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone().as_subclass(torch.Tensor)
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return f"line {frames[-1].lineno}, in {frames[-1].name}" if frames else ""


def guarded(fn, args: tuple, kwargs: dict):
    """fn(*copies of args) with its exception as a StudentError and its result as plain values."""
    try:
        return _plain(fn(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()}))
    except Exception as e:  # student code: any exception is the student's
        raise StudentError({"type": type(e).__name__, "message": str(e), "where": _where(e)}) from e


class LocalObject:
    """An object built by the student's class (e.g. an nn.Module)."""

    def __init__(self, obj):
        self._obj = obj

    def __call__(self, *args, **kwargs):
        return guarded(self._obj, args, kwargs)

    def load_parameters(self, params: dict) -> None:
        """Copy tensors into the module's parameters by name (`W_q.weight`, ...)."""
        def load():
            own = dict(self._obj.named_parameters())
            with torch.no_grad():
                for name, value in params.items():
                    if name not in own:
                        raise KeyError(f"{type(self._obj).__name__} has no parameter {name!r}")
                    own[name].copy_(value)
        guarded(load, (), {})


class LocalStudent:
    """`student.NAME(*args)` calls NAME of the namespace; `student.new(NAME, *args)` builds an object."""

    def __init__(self, namespace: dict):
        self._namespace = namespace

    def _get(self, name: str):
        if name not in self._namespace:
            raise StudentError({"type": "NameError", "message": f"name '{name}' is not defined"})
        return self._namespace[name]

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: guarded(self._get(name), args, kwargs)

    def new(self, name: str, *args, **kwargs) -> LocalObject:
        return LocalObject(guarded(self._get(name), args, kwargs))


def load(path: Path) -> tuple[dict, list[str]]:
    """Run a module or a notebook (every code cell in order, errors allowed, as the grader does) and return its
    namespace and the errors of cells that raised."""
    path = Path(path)
    if path.suffix != ".ipynb":
        return runpy.run_path(str(path), run_name="submission"), []
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    namespace: dict = {"__name__": "submission"}
    errors = []
    for source in code_blocks(cells):
        try:
            exec(compile(source, path.name, "exec"), namespace)
        except Exception as e:  # a cell's error does not stop the others (as in Jupyter's "run all, keep going")
            errors.append(f"{source.splitlines()[0].strip('# -')}: {type(e).__name__}: {e}")
    return namespace, errors
