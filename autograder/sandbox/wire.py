"""The byte format between the grader and a worker: JSON headers plus raw tensor bytes. Never pickle.

Frames (``frames.py``) carry a JSON header and raw blobs; this module turns values into (tree, blobs) and back.
Values nest as JSON: ``None``/bool/int/float/str as themselves, and tagged objects for the rest:
``{"tensor": i, "dtype": "float32", "shape": [..]}`` (blob ``i`` holds the C-contiguous bytes),
``{"tuple": [...]}``, ``{"list": [...]}``, ``{"dict": {...}}``, ``{"handle": n}`` (an object living in the worker),
``{"other": "type name", "repr": "..."}`` (anything else, described, never rebuilt).
The decoding side validates every header against limits before it allocates anything.
"""
from __future__ import annotations

import math

import torch

from .frames import WireError

DTYPES = {
    name: getattr(torch, name)
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
}
MAX_DIMS = 8


def encode(value) -> tuple[object, list[bytes]]:
    """Turn a Python value into (JSON-able tree, blobs)."""
    blobs: list[bytes] = []

    def enc(v, depth=0):
        if depth > 20:
            return {"other": "deeply nested value", "repr": ""}
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int) and not isinstance(v, bool):
            return v if -(2**62) < v < 2**62 else {"other": "int", "repr": str(v)[:50]}
        if isinstance(v, float):
            return v if math.isfinite(v) else {"float": repr(v)}
        if isinstance(v, torch.Tensor):
            t = torch.Tensor.detach(v).cpu().contiguous()
            name = str(t.dtype).removeprefix("torch.")
            if name not in DTYPES:
                return {"other": f"tensor of {name}", "repr": ""}
            raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
            blobs.append(raw.numpy().tobytes())
            return {"tensor": len(blobs) - 1, "dtype": name, "shape": list(t.shape)}
        if isinstance(v, Handle):
            return {"handle": v.id}
        if isinstance(v, tuple):
            return {"tuple": [enc(x, depth + 1) for x in v]}
        if isinstance(v, list):
            return {"list": [enc(x, depth + 1) for x in v]}
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return {"dict": {k: enc(x, depth + 1) for k, x in v.items()}}
        try:
            text = repr(v)[:200]
        except Exception:  # a hostile __repr__
            text = "<unprintable>"
        return {"other": type(v).__qualname__[:100], "repr": text}

    return enc(value), blobs


class Handle:
    """Names an object that lives in the worker (e.g. a student's nn.Module)."""

    def __init__(self, id: int):
        self.id = id

    def __repr__(self):
        return f"Handle({self.id})"


class Other:
    """A value the worker returned that is not one we rebuild (numpy array, custom object...)."""

    def __init__(self, type_name: str, text: str):
        self.type_name, self.text = type_name, text

    def __repr__(self):
        return f"<{self.type_name}>"

    def stands_for(self) -> str:
        """The type it stands for (what `autograder.public.expect` names in messages)."""
        return self.type_name


def decode(tree, blobs: list[bytes]):
    """Rebuild a value from (tree, blobs); tensors come back as plain, fresh ``torch.Tensor`` objects."""
    used: set[int] = set()

    def dec(v, depth=0):
        if depth > 22:
            raise WireError("value nested too deeply")
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if not isinstance(v, dict) or len(v) == 0:
            raise WireError(f"bad value {type(v).__name__}")
        if "tensor" in v:
            return _tensor(v, blobs, used)
        (tag, body), *_ = v.items()
        if tag == "tuple" and isinstance(body, list):
            return tuple(dec(x, depth + 1) for x in body)
        if tag == "list" and isinstance(body, list):
            return [dec(x, depth + 1) for x in body]
        if tag == "dict" and isinstance(body, dict):
            return {str(k): dec(x, depth + 1) for k, x in body.items()}
        if tag == "handle" and isinstance(body, int):
            return Handle(body)
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "other":
            return Other(str(body)[:100], str(v.get("repr", ""))[:200])
        raise WireError(f"unknown tag {tag!r}")

    return dec(tree)


def _tensor(v: dict, blobs: list[bytes], used: set[int]) -> torch.Tensor:
    index, dtype_name, shape = v.get("tensor"), v.get("dtype"), v.get("shape")
    if not isinstance(index, int) or not 0 <= index < len(blobs) or index in used:
        raise WireError("tensor refers to a missing blob")
    used.add(index)
    if dtype_name not in DTYPES:
        raise WireError(f"dtype {dtype_name!r} not allowed")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or \
            not all(type(n) is int and 0 <= n < 1 << 31 for n in shape):
        raise WireError(f"bad shape {shape!r}")
    dtype = DTYPES[dtype_name]
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    blob = blobs[index]
    if numel * itemsize != len(blob):
        raise WireError(f"tensor of shape {shape} and dtype {dtype_name} needs {numel * itemsize} bytes, got {len(blob)}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    storage_dtype = torch.int16 if dtype == torch.bfloat16 else dtype
    t = torch.frombuffer(bytearray(blob), dtype=storage_dtype).reshape(shape)
    return t.view(torch.bfloat16) if dtype == torch.bfloat16 else t


def grad_ramp(shape, dtype=torch.float64) -> torch.Tensor:
    """The fixed weight w of a gradient check: the worker backpropagates sum(output * w), the grader's reference
    does the same, so every output element counts (a plain sum would hide errors that cancel)."""
    shape = tuple(shape)
    return torch.linspace(-1.0, 1.0, math.prod(shape), dtype=dtype).reshape(shape)

