"""The released checker's two front ends: `python check.py` (a terminal) and `Notebook().check(...)` (a notebook
cell). Both run the public checks in this process on the student's code and print one line per check, its status
word beside its icon, in one language."""
from __future__ import annotations

import argparse
import ast
import hashlib
import importlib
import json
import os
import sys
from pathlib import Path

from .forbidden import scan
from .local import LocalStudent, load
from .notebook import code_blocks
from .run import CheckTimeout, Outcome, deadline, run
from .status import ICON, STATUS
from .text import LANGS, Text

LOAD_SECONDS = 60.0  # running the file itself (a notebook's every cell) before any check
HERE = Path(__file__).resolve().parent
FOLDER = HERE.parent  # the student's assignment folder: the checker is shipped inside it


def _public_checks():
    module = importlib.import_module(f"{__package__}.public_checks")
    from .check import collect
    return module, collect(vars(module))


def _info() -> dict:
    return _public_checks()[0].FACTS.assignment


def render(outcomes: list[Outcome], lang: str, functions: list[str]) -> list[str]:
    lines = []
    for function in functions:
        mine = [o for o in outcomes if o.check.function == function]
        if not mine:
            continue
        lines.append(function)
        for o in mine:
            lines.append(f"  {ICON[o.status]} [{STATUS[o.status].pick(lang)}] {o.title.pick(lang)}")
            if o.detail.pick(lang):
                lines.append(f"      {o.detail.pick(lang)}")
            if o.diagnosis is not None:
                label = "诊断" if lang == "zh" else "Diagnosis"
                lines.append(f"      {label}: {o.diagnosis.text.pick(lang)}")
    passed = sum(o.status == "passed" for o in outcomes)
    lines.append(Text(zh=f"公开检查：{passed}/{len(outcomes)} 通过。", en=f"Public checks: {passed} of {len(outcomes)} passed.")
                 .pick(lang))
    return lines


def _changed(name: str) -> bool:
    """Does the released file `name` differ from the release (manifest.json's hashes)?"""
    try:
        released = json.loads((FOLDER / "manifest.json").read_text(encoding="utf-8"))["files"][name]
        return hashlib.sha256((FOLDER / name).read_bytes()).hexdigest() != released
    except (OSError, KeyError, ValueError, TypeError):
        return True


def choose(info: dict) -> Path:
    """The file to check when none is named: the module or the notebook, whichever the student has changed (the
    module when both or neither have)."""
    module, notebook = FOLDER / info["module"], FOLDER / info["notebook"]
    if notebook.is_file() and _changed(notebook.name) and not (module.is_file() and _changed(module.name)):
        return notebook
    return module


def _forbidden(path: Path, info: dict) -> dict[str, set[str]]:
    """Graded function -> forbidden APIs its source refers to (the grader's static scan; it also blocks them at
    run time, which this checker does not)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        text = "\n".join(code_blocks(json.loads(text).get("cells", [])))
    try:
        return scan(ast.parse(text), info.get("forbidden", []), set(info["functions"]), own=Path(info["module"]).stem)
    except (SyntaxError, ValueError):
        return {}


def main(argv: list[str] | None = None) -> int:
    info = _info()
    parser = argparse.ArgumentParser(prog="python check.py",
                                     description=f"{info['title']['zh']} / {info['title']['en']}: "
                                                 "公开检查 / public checks")
    parser.add_argument("file", nargs="?", type=Path, help=f"{info['module']} or {info['notebook']}")
    parser.add_argument("--lang", choices=LANGS, default=info.get("default_lang", "zh"))
    parser.add_argument("--function", "-f", action="append", choices=info["functions"],
                        help="check only this function (repeatable)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per check (default 10)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MPLBACKEND", "Agg")  # a notebook's plots must not open windows
    path = args.file or choose(info)
    if not path.is_file():
        print(Text(zh=f"找不到 {path}", en=f"{path} not found").pick(args.lang), file=sys.stderr)
        return 2
    print(Text(zh=f"检查 {path.name}（只有公开检查；评分时另有隐藏检查：{info['hidden_topics']['zh']}）",
               en=f"Checking {path.name} (public checks only; grading adds hidden checks: {info['hidden_topics']['en']})")
          .pick(args.lang))
    try:
        outcomes, cell_errors = check_file(path, args.function, args.timeout)
    except CheckTimeout:
        print(Text(zh=f"{path.name} 在 {LOAD_SECONDS:g} 秒内没有加载完（模块顶层是否有死循环或很慢的代码？）",
                   en=f"{path.name} did not finish loading within {LOAD_SECONDS:g} s (an infinite loop or slow code at "
                      "the top level?)").pick(args.lang))
        return 1
    except Exception as e:  # the file itself does not run
        print(Text(zh=f"{path.name} 无法运行：{type(e).__name__}: {e}",
                   en=f"{path.name} does not run: {type(e).__name__}: {e}").pick(args.lang))
        return 1
    for error in cell_errors:
        print(Text(zh=f"单元格出错（其余单元格照常运行）{error}", en=f"a cell raised (the others still ran) {error}")
              .pick(args.lang))
    print("\n".join(render(outcomes, args.lang, info["functions"])))
    return 0 if all(o.status == "passed" for o in outcomes) else 1


def check_file(path: Path, functions: list[str] | None = None, timeout: float = 10.0) -> tuple[list[Outcome], list[str]]:
    """Run the module or notebook at `path` and its public checks (of `functions`, default all): (outcomes, errors
    of notebook cells that raised). Raises what the file raises when a module does not run."""
    path = Path(path)
    sys.path.insert(0, str(path.resolve().parent))
    with deadline(LOAD_SECONDS):
        namespace, cell_errors = load(path)
    _, checks = _public_checks()
    checks = [c for c in checks if not functions or c.function in functions]
    return run(checks, LocalStudent(namespace), timeout, _forbidden(path, _info())), cell_errors


class Notebook:
    """`grader = Notebook(); grader.check("f")` in a notebook cell: the public checks of the graded function f,
    run on what the notebook has defined so far."""

    def __init__(self, lang: str | None = None):
        self.lang = lang or _info().get("default_lang", "zh")

    def check(self, *functions: str, namespace: dict | None = None) -> bool:
        if namespace is None:
            namespace = sys._getframe(1).f_globals  # the notebook's own names
        _, checks = _public_checks()
        unknown = [f for f in functions if f not in {c.function for c in checks}]
        if unknown:
            raise ValueError(f"no public checks for {unknown}")
        chosen = [c for c in checks if not functions or c.function in functions]
        outcomes = run(chosen, LocalStudent(namespace))
        print("\n".join(render(outcomes, self.lang, _info()["functions"])))
        return all(o.status == "passed" for o in outcomes)

    def check_all(self) -> bool:
        return self.check(namespace=sys._getframe(1).f_globals)
