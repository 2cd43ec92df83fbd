"""Read one submission file into Python source, safely: no symlinks, size-capped, strict UTF-8, notebooks
flattened to their code cells in order with IPython magics, shell escapes and otter calls neutralised."""
from __future__ import annotations

import ast
import hashlib
import os
import re
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from autograder.public.notebook import block
from autograder.public.text import Text

MAX_BYTES = 2 << 20


class SubmissionError(Exception):
    """The file cannot be graded; `text` says why in words a student can act on."""

    def __init__(self, *, zh: str, en: str):
        super().__init__(en)
        self.text = Text(zh=zh, en=en)


@dataclass(frozen=True)
class Submission:
    path: Path
    source: str          # the whole Python source (all cells of a notebook, joined)
    filename: str        # name shown in tracebacks: the graded file's own name
    notebook: bool
    sha256: str          # of the raw file bytes: a changed submission is regraded
    tree: ast.Module = field(repr=False, compare=False)  # parsed once, for the static scans
    cells: tuple[str, ...] = ()  # a notebook's code cells: the worker runs them one by one, errors allowed

    def definitions(self, name: str) -> list[Text]:
        """Where the top-level `def name` / `class name` statements are, in the order they run: "in cell N" for a
        notebook (N as Jupyter counts cells), "at line L" for a module (with the `# In[N]:` cell of a Jupyter
        export when there is one). The last one is what Python keeps, so it is the one graded."""
        found = []
        if self.notebook:
            for cell in self.cells:
                number = re.match(r"# --- cell (\d+) ---", cell)
                if number and any(_is_def(node, name) for node in _parsed(cell)):
                    n = number.group(1)
                    found.append(Text(zh=f"第 {n} 个单元格中", en=f"in cell {n}"))
            return found
        lines = self.source.splitlines()
        for node in self.tree.body:
            if _is_def(node, name):
                line = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
                marker = next((m.group(1) for m in (EXPORT_CELL.match(t) for t in reversed(lines[:line - 1])) if m),
                              None)
                found.append(Text(zh=f"第 {line} 行" + (f"（单元格 In[{marker}]）" if marker else ""),
                                  en=f"at line {line}" + (f" (cell In[{marker}])" if marker else "")))
        return found


def read_bytes(path: Path) -> bytes:
    """The file's bytes, refusing symlinks (at any moment: O_NOFOLLOW), special files and oversize files."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        if os.path.islink(path):
            raise SubmissionError(en=f"{path.name} is a symbolic link; submit the file itself",
                                  zh=f"{path.name} 是符号链接；请提交文件本身") from None
        raise SubmissionError(en=f"cannot read {path.name}: {e.strerror}", zh=f"无法读取 {path.name}：{e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SubmissionError(en=f"{path.name} is not a regular file", zh=f"{path.name} 不是普通文件")
        if info.st_size > MAX_BYTES:
            raise SubmissionError(en=f"{path.name} is {info.st_size} bytes; the limit is {MAX_BYTES}",
                                  zh=f"{path.name} 有 {info.st_size} 字节，上限是 {MAX_BYTES}")
        return f.read(MAX_BYTES + 1)


def decode_utf8(raw: bytes, name: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise SubmissionError(
            en=f"{name} is not UTF-8 text (byte 0x{raw[e.start]:02x} on line {line}); save it as UTF-8",
            zh=f"{name} 不是 UTF-8 编码（第 {line} 行的字节 0x{raw[e.start]:02x}）；请以 UTF-8 保存") from None


def skip_iri_grammar() -> None:
    """nbformat validates with jsonschema, which compiles an IRI grammar (rfc3987_syntax, about a second) when it
    is imported. Notebook schemas use no IRI format, so a command that only reads notebooks skips that optional
    module. Call it before anything imports jsonschema; it affects this process only."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


def notebook_cells(text: str, name: str) -> list[str]:
    """Code cells in order, each headed by its number; magics, shell lines and otter calls become `pass`."""
    import nbformat  # here, not at the top: a command may call skip_iri_grammar() first

    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as e:
        raise SubmissionError(en=f"{name} is not a valid Jupyter notebook ({type(e).__name__})",
                              zh=f"{name} 不是有效的 Jupyter notebook（{type(e).__name__}）") from None
    return [block(number, cell.source) for number, cell in enumerate(nb.cells, 1) if cell.cell_type == "code"]


def load(path: Path, graded: set[str] | None = None) -> Submission:
    """Read and parse a submission. A .py file must parse as a whole. A notebook runs cell by cell with errors
    allowed, so only the cells that define a `graded` name (all cells when None) are parsed here, for the static
    scans; a syntax error elsewhere becomes that cell's error when it runs."""
    path = Path(path)
    raw = read_bytes(path)
    text = decode_utf8(raw, path.name)
    notebook = path.suffix == ".ipynb"
    cells = tuple(notebook_cells(text, path.name)) if notebook else ()
    source = "\n".join(cells) if notebook else text
    if notebook:
        tree = ast.Module(body=[node for cell in cells if _defines(cell, graded) for node in _parsed(cell)],
                          type_ignores=[])
    else:
        tree = _parse(source, path.name)
    return Submission(path, source, path.name, notebook, hashlib.sha256(raw).hexdigest(), tree, cells)


EXPORT_CELL = re.compile(r"^# In\[\s*(\d+)\s*\]:")


def _is_def(node: ast.stmt, name: str) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name


def _defines(cell: str, names: set[str] | None) -> bool:
    return names is None or any(re.search(rf"^(?:async\s+def|def|class)\s+{re.escape(n)}\b", cell, re.M)
                                for n in names)


# ast.parse is not thread-safe in CPython 3.11: the AST-object constructor keeps one recursion counter per interpreter,
# so two grading threads parsing at once (a garbage collection switching threads mid-parse) can fail with "SystemError:
# AST constructor recursion depth mismatch" (python/cpython#106905; reproduced here). One parse at a time.
PARSE_LOCK = threading.Lock()


def _parsed(cell: str) -> list[ast.stmt]:
    try:
        with PARSE_LOCK:
            return ast.parse(cell).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []


def _parse(source: str, name: str) -> ast.Module:
    try:
        with PARSE_LOCK:
            return ast.parse(source, name)  # parsing runs nothing; it finds syntax errors
    except SyntaxError as e:
        raise SubmissionError(en=f"SyntaxError on line {e.lineno} of {name}: {e.msg}",
                              zh=f"{name} 第 {e.lineno} 行有语法错误：{e.msg}") from None
    except ValueError as e:  # e.g. null bytes
        raise SubmissionError(en=f"{name} cannot be compiled: {e}", zh=f"{name} 无法编译：{e}") from None
    except (RecursionError, MemoryError):  # e.g. 200,000 unary minus signs in a row: CPython cannot compile it either
        raise SubmissionError(en=f"{name} is nested too deeply to compile (an expression with thousands of levels)",
                              zh=f"{name} 嵌套层数过多，无法编译（某个表达式有成千上万层）") from None
