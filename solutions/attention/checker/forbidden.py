"""Find ready-made APIs in a submission's source before it runs (the worker also records calls at run time).

Returns, for each top-level function or class of the submission, the forbidden APIs its body refers to: attribute
access (`F.layer_norm`), `from x import name`, and module-level aliases of either used inside it.
"""
from __future__ import annotations

import ast

from .expect import Diagnosis
from .text import Text

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def scan(tree: ast.Module | str, forbidden: list[str], only: set[str] | None = None,
         own: str = "") -> dict[str, set[str]]:
    """{top-level name: forbidden APIs its body uses}; `only` limits the search to those names (the graded ones);
    `own` is the submission's module name: `own.name` and `self.name` are the student's code, not the API."""
    if isinstance(tree, str):
        tree = ast.parse(tree)
    attrs = {q.rpartition(".")[2]: q for q in forbidden if not q.startswith("op:")}  # op patterns: run time only
    aliases: dict[str, str] = {}  # module-level name -> forbidden API it stands for
    for node in tree.body:
        for name, api in _bindings(node, attrs):
            aliases[name] = api
    found: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, DEFS) and (only is None or node.name in only):
            hits = set()
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and sub.attr in attrs and not _is_self_reference(sub, own):
                    hits.add(attrs[sub.attr])
                elif isinstance(sub, ast.Name) and sub.id in aliases:
                    hits.add(aliases[sub.id])
                elif isinstance(sub, (ast.ImportFrom, ast.Assign)):
                    hits.update(api for _, api in _bindings(sub, attrs))
            if hits:
                found[node.name] = hits
    return found


def _bindings(node: ast.AST, attrs: dict[str, str]):
    """(name, api) for `from m import api as name` and `name = something.api`."""
    if isinstance(node, ast.ImportFrom):
        for alias in node.names:
            if alias.name in attrs and (node.module or "").startswith("torch"):
                yield alias.asname or alias.name, attrs[alias.name]
    elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr in attrs:
        for target in node.targets:
            if isinstance(target, ast.Name):
                yield target.id, attrs[node.value.attr]


def _is_self_reference(node: ast.Attribute, own: str) -> bool:
    """`self.layer_norm` or `<own module>.layer_norm`: the student's own code, not the forbidden API."""
    root = node.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in {"self", own}


FORBIDDEN_API = Diagnosis("forbidden_api", Text(
    zh="你调用了作业要求你自己实现的现成函数：只要还在用它，这个函数的检查都得 0 分。请删掉这个调用，用基本的张量运算自己写。",
    en="You call a ready-made function that the assignment asks you to write yourself: every check of this function "
       "scores 0 while it is used. Remove the call and build the computation from basic tensor operations."))
