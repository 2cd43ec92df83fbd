"""Make an assignment's forbidden APIs unavailable in this process, for good. The zygote calls `disable` once,
before it forks any worker, so no student code ever runs while they are available, and every worker inherits it.

- ``op:<glob>`` names (``op:*layer_norm*``): every aten operator whose name matches gets, for every dispatch key
  that has a kernel for it (CPU, the composite aliases, functorch's batching rules, Meta, NestedTensor...: each a
  way to reach the computation, e.g. under `torch.vmap`), a kernel that raises. The registrations live in a
  C++ dispatcher library object that is deliberately leaked: no Python object refers to it (it is not tracked by
  the garbage collector either), so no Python code in the worker can find it and undo them, and the original
  kernels cannot be reached from Python. torch-function modes, `torch.ops.aten...`, `DisableTorchFunction` and a
  forked child all end in the dispatcher.
- Python names (``torch.nn.functional.layer_norm``, ``torch.nn.LayerNorm``): a Python
  function's own code object is replaced (so every other reference to it, found by `gc` or another import path,
  raises too), a class's ``__init__`` and ``__call__`` raise (new instances, and the existing ones of an operator
  class), anything else is rebound to a function that raises.

A refusal raises RuntimeError whose message contains `REFUSED`; the grader may use that to say "forbidden" (it only
ever costs the student points). `probe` (in the zygote) and `canary` (in each worker, before student code) return
the disabled APIs that still work: the grader refuses to run when there is one.
"""
from __future__ import annotations

import ctypes
import fnmatch
import functools
import importlib
import re
import types
import warnings

import torch

REFUSED = "is disabled in this assignment"
KEY_LINE = re.compile(r"^(\w+)(?:\[alias\])?: registered at ")
NOT_KEYS = {"debug", "name", "schema"}
OURS = "registered at /dev/null:0"


def message(name: str) -> str:
    return f"{name} {REFUSED}: implement it yourself"


def disable(names: list[str]) -> None:
    """Disable every name of `names` (``op:`` globs and qualified Python names) in this process."""
    _block_aten(_globs(names))
    for name in names:
        if not name.startswith("op:"):
            _disable_python(name)


def aten_ops(globs: list[str]) -> list[str]:
    """``name.overload`` of every registered aten operator whose name (before the overload) matches a glob."""
    return list(_aten_ops(tuple(globs)))


@functools.cache
def _aten_ops(globs: tuple[str, ...]) -> tuple[str, ...]:  # cached in the zygote, inherited by every worker
    found = []
    for qualified in torch._C._dispatch_get_all_op_names():
        if qualified.startswith("aten::"):
            name = qualified[len("aten::"):]
            if any(fnmatch.fnmatchcase(name.split(".")[0], g) for g in globs):
                found.append(name)
    return tuple(sorted(found))


def _block_aten(globs: list[str]) -> None:
    if not globs:
        return
    library = torch._C._dispatch_library("IMPL", "aten", "")
    with warnings.catch_warnings():  # "overriding a previously registered kernel" is the point
        warnings.simplefilter("ignore")
        for name in aten_ops(globs):
            for key in _registered_keys("aten::" + name):
                library.impl(name, key, _refuser("aten::" + name))
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(library))  # never freed: the registrations outlive every reference


def _registered_keys(qualified: str) -> list[str]:
    """Every dispatch key (aliases included) with a kernel registered for the operator: CPU, the composite
    aliases, but also functorch's batching rules, Meta, NestedTensor..., each a way to reach the computation."""
    lines = torch._C._dispatch_dump(qualified).splitlines()
    return [m.group(1) for line in lines if (m := KEY_LINE.match(line)) and m.group(1) not in NOT_KEYS]


def _refuser(name: str):
    text = message(name)

    def refuse(*args, **kwargs):
        raise RuntimeError(text)

    return refuse


def _disable_python(qualname: str) -> None:
    owner_name, _, attr = qualname.rpartition(".")
    try:
        owner = importlib.import_module(owner_name)
    except ImportError:
        return
    original = getattr(owner, attr, None)
    if isinstance(original, type):  # new instances, and calls of the ones that exist (a HigherOrderOperator)
        original.__init__ = original.__call__ = _refuser(qualname)
    elif isinstance(original, types.FunctionType) and not original.__code__.co_freevars:
        original.__code__ = _code_raising(qualname)  # every reference to this function object now refuses
    elif original is not None:
        setattr(owner, attr, _refuser(qualname))


def _code_raising(qualname: str) -> types.CodeType:
    """A closure-free code object that raises the refusal (to put in place of a Python function's own code)."""
    namespace: dict = {}
    exec(f"def refuse(*args, **kwargs):\n    raise RuntimeError({message(qualname)!r})\n", namespace)
    return namespace["refuse"].__code__


def probe(names: list[str]) -> list[str]:
    """The disabled APIs that are still available (run in the zygote, after `disable`): an aten operator whose
    computed dispatch table still has a kernel that is not ours, a Python name that does not raise the refusal."""
    return _python_available(names) + [f"aten::{op}" for op in aten_ops(_globs(names)) if _op_available(op)]


def canary(names: list[str]) -> list[str]:
    """`probe` at a worker's cost (well under a millisecond), before its student code runs: every Python name, and
    the first and last matching aten operators (a worker is a fork of the zygote, which ran the full `probe`)."""
    ops = aten_ops(_globs(names))
    return _python_available(names) + [f"aten::{op}" for op in sorted(set(ops[:1] + ops[-1:])) if _op_available(op)]


def _globs(names: list[str]) -> list[str]:
    return [n.removeprefix("op:") for n in names if n.startswith("op:")]


def _op_available(op: str) -> bool:
    table = torch._C._dispatch_dump_table("aten::" + op).splitlines()
    return any("kernel]" in line and OURS not in line for line in table)


def _python_available(names: list[str]) -> list[str]:
    available = []
    for name in (n for n in names if not n.startswith("op:")):
        owner_name, _, attr = name.rpartition(".")
        try:
            target = getattr(importlib.import_module(owner_name), attr)
        except (ImportError, AttributeError):
            continue
        q = torch.ones(1, 2, 2)
        try:
            target(2, 1) if isinstance(target, type) else target(q, q, q)
        except Exception as e:  # noqa: BLE001
            if REFUSED in str(e):
                continue
        available.append(name)
    return available
