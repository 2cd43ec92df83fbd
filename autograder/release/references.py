"""Hidden references: `autograder.assignments.<id>.cases.build_references(solution)` -> a deterministic .npz."""
from __future__ import annotations

import importlib
import io
import re
import sys
import types
import zipfile
from pathlib import Path

from .errors import ReleaseError

NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")


def load_cases(assignment: str) -> types.ModuleType | None:
    """The assignment's case module, or None when it does not exist (yet)."""
    name = f"autograder.assignments.{assignment}.cases"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            return None
        raise


def import_solution(source: str, path: Path, digest: str) -> types.ModuleType:
    """Import the clean solution text (what the release writes to `path`) under a unique module name."""
    name = f"_autograder_release_solution_{digest[:16]}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses, pickling and typing look modules up by name
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def npz_bytes(arrays: dict) -> bytes:
    """A .npz (`numpy.load` reads it) whose bytes depend only on the arrays: sorted names, fixed dates, stored."""
    import numpy as np
    from numpy.lib import format as npy

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(arrays):
            if not isinstance(name, str) or not NAME_RE.fullmatch(name):
                raise ReleaseError(f"build_references: bad reference name {name!r}")
            array = np.ascontiguousarray(np.asarray(arrays[name]))
            if array.dtype.hasobject:
                raise ReleaseError(f"build_references: {name!r} is an object array (not allowed)")
            member = io.BytesIO()
            npy.write_array(member, array, allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.create_system, info.external_attr = 3, 0o644 << 16
            archive.writestr(info, member.getvalue(), compress_type=zipfile.ZIP_STORED)
    return buffer.getvalue()


def build(assignment: str, solution_source: str, solution_path: Path, digest: str) -> tuple[bytes | None, str]:
    """(npz bytes or None, a one-line message for the summary)."""
    cases = load_cases(assignment)
    if cases is None:
        return None, f"autograder.assignments.{assignment}.cases not found: hidden references skipped"
    if not callable(getattr(cases, "build_references", None)):
        return None, f"{cases.__name__} has no build_references(solution): hidden references skipped"
    solution = import_solution(solution_source, solution_path, digest)
    try:
        arrays = cases.build_references(solution)
    finally:
        sys.modules.pop(solution.__name__, None)
    if not isinstance(arrays, dict) or not arrays:
        raise ReleaseError("build_references(solution) must return a non-empty dict[str, numpy.ndarray]")
    return npz_bytes(arrays), f"hidden references: {len(arrays)} arrays from {cases.__name__}"
