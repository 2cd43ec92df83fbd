"""The students' checker: `student_template/<id>/checker/` (the public runtime `autograder/public/`, the chapter's
`public_checks.py`, and `public_facts.json`) and `student_template/<id>/check.py` to run it (the same in
`solutions/<id>/`, so that the solution folder runs as is). It needs only torch:
`python check.py` in the released folder. `public_facts.json` is also written beside the chapter's checks, where
the grader's copy of the same public checks reads it.

What it may hold is checked here (and again by tests/test_student_checker.py): every shipped check is public, the
shipped code imports nothing of the grader (so nothing hidden can come along), and the leak guard of the release
scans these files like every other student file.
"""
from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

from autograder.assignments import get

from .errors import ReleaseError
from .references import import_solution

PUBLIC = Path(__file__).resolve().parents[1] / "public"
IMPORT = re.compile(r"^from autograder\.public(\.|\s)", re.M)
ENTRY = '''\
"""公开检查 / public checks — 只需要 torch / needs only torch:

    python check.py                 # 检查你改过的文件 / checks the file you changed ({module} or {notebook})
    python check.py {notebook}  --lang en
    python check.py -f {first}      # 只检查一个函数 / one function only

只包含公开检查；评分时另有隐藏检查。 / Public checks only; grading adds hidden checks.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checker.cli import main  # noqa: E402

sys.exit(main())
'''


def _relative(source: str, where: str) -> str:
    """The chapter's public checks with `from autograder.public...` made relative to the checker package."""
    out = IMPORT.sub(lambda m: "from ." if m.group(1) == "." else "from . ", source)
    tree = ast.parse(out)
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        for name in names:
            if name.split(".")[0] not in {"__future__", "torch", "math", "pathlib", "typing", "dataclasses"}:
                raise ReleaseError(f"the public checks import {name!r}: they may import only torch, the standard "
                                   "library's basics and autograder.public (they are released to students)", where)
    return out


def build(assignment: str, solution_source: str, solution_path: Path, digest: str) -> dict[str, bytes]:
    """Repo-relative path -> bytes of the checker and the published facts; {} when the chapter has no public
    checks module."""
    spec = get(assignment)
    if not (spec.directory / "public_checks.py").is_file():
        return {}
    from autograder.public import facts
    from autograder.public.check import collect

    rel = f"autograder/assignments/{assignment}/public_checks.py"
    checks = collect(vars(importlib.import_module(f"{spec.package}.public_checks")))
    hidden = [c.name for c in checks if c.visibility != "public"]
    if hidden:
        raise ReleaseError(f"public_checks.py defines hidden checks {hidden}: move them to checks.py", rel)
    builder = importlib.import_module(f"{spec.package}.public_facts")
    solution = import_solution(solution_source, solution_path, digest)
    try:
        info, cases, texts = builder.build(solution)
    finally:
        sys.modules.pop(solution.__name__, None)
    published = facts.dumps(info, cases, texts).encode("utf-8")
    shipped = {"checker/public_facts.json": published,
               "checker/public_checks.py": _relative((spec.directory / "public_checks.py").read_text("utf-8"),
                                                     rel).encode("utf-8"),
               "check.py": ENTRY.format(module=spec.module, notebook=spec.notebook or spec.module,
                                        first=spec.functions[0]).encode("utf-8")}
    shipped.update({f"checker/{path.name}": path.read_bytes() for path in sorted(PUBLIC.glob("*.py"))})
    out = {f"autograder/assignments/{assignment}/public_facts.json": published}
    for folder in (f"student_template/{assignment}", f"solutions/{assignment}"):  # the solution folder runs as is
        out.update({f"{folder}/{name}": data for name, data in shipped.items()})
    return out
