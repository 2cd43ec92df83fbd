"""Which file of a student's folder is graded: the one rule `grade`, `check` and the Gradescope adapter share.

    res = resolve(folder, ("lab.py", "lab.ipynb"), assignment="lab")
    res.path                       # the file to grade, or None: then res.reason_en / res.reason_zh say what was found
    res.found                      # every candidate considered (paths relative to the folder), best first
    res.note_en, res.note_zh       # set when the chosen file is the untouched release

`names` are the assignment's submission files, in order of preference (module form first). The rules, in order:

1. Candidates: files anywhere under the folder (not under `__MACOSX`, `.ipynb_checkpoints`, `__pycache__`, `.git` or
   a dot-folder; no dotfiles) named like an expected name: exactly, in another case (`Lab.py`), or with what an
   LMS or an OS appends to a copy (`lab (1).py`, `lab(2).py`, `lab-2.ipynb`, `lab_1.py`, `lab copy.py`,
   `lab 2.py`, `lab - Copy.py`); the suffix must be the same. Symbolic links are
   never followed (not into folders, not to files): a linked candidate is reported (`links`), never chosen.
2. A candidate byte-identical to the released stub (sha256 in a `manifest.json` found in the folder, or in the
   release manifest shipped with this grader for the assignment) is the untouched release: it is only chosen when
   nothing else is (rule 4).
3. Among the rest: an exact name before a case variant before a copy's name; then the order of `names`; then the
   shallowest; then the most recently modified; then by path.
4. When every candidate is the untouched stub, the first of them (ranked as above) is chosen anyway, with a note:
   the student submitted nothing new, and grading it gives the honest "TODO not done" feedback.

Reads only file names, sizes, times and bytes (no import of torch or of the submission).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

SKIP_DIRS = frozenset({"__MACOSX", ".ipynb_checkpoints", "__pycache__", ".git"})
MANIFEST = "manifest.json"                   # written by `autograder release` into the student folder
RELEASE_MANIFEST = "release_manifest.json"   # autograder/assignments/<id>/: hashes of everything the release wrote
PACKAGE = Path(__file__).resolve().parents[1]  # the installed `autograder` package
REPO_ROOT = PACKAGE.parent                   # a checkout: student_template/<id>/manifest.json is there too
MAX_MANIFEST_BYTES = 1 << 20
MAX_LISTED = 8                               # names shown in a message
MAX_OTHERS = 50                              # other files kept in a Resolution
MAX_NAME = 80                                # characters of one name shown in a message

EXACT, CASE_VARIANT, COPY_VARIANT = 0, 1, 2
# What follows the stem in a copy's name: " (1)", "(2)", "-2", "_1", " 2", " copy", " copy 2", " - Copy", " - Copy (2)".
_COPY = re.compile(r"(?: ?\(\d{1,4}\)|[-_ ]\d{1,4}| copy(?: \d{1,4})?| - copy(?: \(\d{1,4}\))?)+", re.IGNORECASE)
_ASSIGNMENT_ID = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class Candidate:
    rel: str          # path relative to the folder, with forward slashes
    path: Path
    expected: str     # the name of `names` it stands for
    match: int        # EXACT, CASE_VARIANT or COPY_VARIANT
    form: int         # index of `expected` in `names`
    depth: int        # 0: directly in the folder
    mtime_ns: int
    link: bool        # a symbolic link: reported, never followed, never chosen
    stub: bool        # byte-identical to the released stub of `expected`

    def rank(self) -> tuple:
        return (self.link, self.stub, self.match, self.form, self.depth, -self.mtime_ns, self.rel)


@dataclass(frozen=True)
class Resolution:
    path: Path | None                  # the file to grade, or None
    found: tuple[str, ...] = ()        # every candidate considered (relative paths), best first
    reason_en: str = ""                # when path is None: what was expected and what was found
    reason_zh: str = ""
    note_en: str = ""                  # when the chosen file is the untouched release
    note_zh: str = ""
    stubs: tuple[str, ...] = ()        # candidates byte-identical to the released stub
    links: tuple[str, ...] = ()        # candidates that are symbolic links
    others: tuple[str, ...] = ()       # the folder's other files (not candidates), at most MAX_OTHERS
    candidates: tuple[Candidate, ...] = ()  # the candidates, best first

    def other_form(self) -> Path | None:
        """The best other candidate of another form than the chosen one (e.g. the notebook beside the .py file)."""
        chosen = next((c for c in self.candidates if c.path == self.path), None)
        if chosen is None:
            return None
        return next((c.path for c in self.candidates if not c.link and c.form != chosen.form), None)


def match(name: str, names: tuple[str, ...]) -> tuple[int, int] | None:
    """(EXACT | CASE_VARIANT | COPY_VARIANT, index in names) when a file called `name` stands for one of `names`."""
    for form, expected in enumerate(names):
        if name == expected:
            return EXACT, form
    for form, expected in enumerate(names):
        stem, suffix = _split(expected)
        if not name.endswith(suffix) or len(name) <= len(suffix):
            continue
        head = name[:len(name) - len(suffix)]
        if head.casefold() == stem.casefold():
            return CASE_VARIANT, form
        if head[:len(stem)].casefold() == stem.casefold() and _COPY.fullmatch(head[len(stem):]):
            return COPY_VARIANT, form
    return None


def _split(name: str) -> tuple[str, str]:
    path = Path(name)
    return (path.stem, path.suffix) if path.suffix else (name, "")


def resolve(folder: Path, names: tuple[str, ...], assignment: str | None = None) -> Resolution:
    """Choose the file to grade in `folder` (see the module's docstring). `assignment` finds the release manifest
    shipped with the grader when the folder has none; without it, the assignment whose release lists `names`."""
    folder, names = Path(folder), tuple(names)
    files = list(_walk(folder))
    manifests = [path for _, path, info in files if path.name == MANIFEST and stat.S_ISREG(info.st_mode)]
    stub_hashes = _stub_hashes(manifests, names, assignment)
    found: list[Candidate] = []
    others: list[str] = []
    for rel, path, info in files:
        hit = match(path.name, names)
        link = stat.S_ISLNK(info.st_mode)
        if hit is None or not (link or stat.S_ISREG(info.st_mode)):  # a FIFO with a graded file's name is no candidate
            others.append(rel)
            continue
        kind, form = hit
        stub = not link and _sha256(path) in stub_hashes.get(names[form], ())
        found.append(Candidate(rel, path, names[form], kind, form, rel.count("/"), info.st_mtime_ns, link, stub))
    found.sort(key=Candidate.rank)
    suffixes = {_split(n)[1] for n in names}
    others.sort(key=lambda rel: (Path(rel).suffix not in suffixes, rel.count("/"), rel))  # near misses first
    fields = dict(found=tuple(c.rel for c in found), stubs=tuple(c.rel for c in found if c.stub),
                  links=tuple(c.rel for c in found if c.link), others=tuple(others[:MAX_OTHERS]),
                  candidates=tuple(found))
    chosen = next((c for c in found if not c.link), None)
    if chosen is None:
        en, zh = _nothing(names, [c.rel for c in found], others)
        return Resolution(None, reason_en=en, reason_zh=zh, **fields)
    note_en = note_zh = ""
    if chosen.stub:  # rule 4: every candidate is the untouched release
        also = [c.rel for c in found if c.stub and c is not chosen]
        note_en = (f"{_shown(chosen.rel)} is the file as released, unchanged"
                   + (f" (and so is {_listed(also)})" if also else "") + ": it is graded as it is")
        note_zh = (f"{_shown(chosen.rel)} 与发布时的文件完全相同（未修改）"
                   + (f"，{_listed(also, '、')} 也一样" if also else "") + "：按原样评分")
    return Resolution(chosen.path, note_en=note_en, note_zh=note_zh, **fields)


def _walk(folder: Path):
    """(relative path, path, lstat) of every file under `folder`, sorted; symbolic links are listed, not followed."""
    if folder.is_symlink() or not folder.is_dir():
        return
    for top, dirs, files in os.walk(folder, followlinks=False):
        base = Path(top)
        kept = []
        for d in sorted(dirs):
            if d in SKIP_DIRS or d.startswith("."):
                continue
            if (base / d).is_symlink():  # reported like a file, never entered
                files.append(d)
                continue
            kept.append(d)
        dirs[:] = kept
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = base / name
            try:
                info = path.lstat()
            except OSError:
                continue
            yield path.relative_to(folder).as_posix(), path, info


def _stub_hashes(manifests: list[Path], names: tuple[str, ...], assignment: str | None) -> dict[str, set[str]]:
    """expected name -> sha256 of its released stub: from every `manifest.json` in the folder (any version the
    student was given) and from the release that ships with this grader (autograder/assignments/<id>/
    release_manifest.json, a checkout's student_template/<id>/manifest.json, or the Gradescope zip's copy of it,
    autograder/assignments/<id>/student_manifest.json)."""
    hashes: dict[str, set[str]] = {n: set() for n in names}

    def add(files, prefix: str = "") -> None:
        if isinstance(files, dict):
            for n in names:
                value = files.get(prefix + n)
                if isinstance(value, str):
                    hashes[n].add(value.lower())

    for path in manifests:
        add(_json(path).get("files"))
    for aid in _assignments(names, assignment):
        add(_json(PACKAGE / "assignments" / aid / RELEASE_MANIFEST).get("generated"), f"student_template/{aid}/")
        add(_json(REPO_ROOT / "student_template" / aid / MANIFEST).get("files"))
        add(_json(PACKAGE / "assignments" / aid / "student_manifest.json").get("files"))
    return {n: h for n, h in hashes.items() if h}


def _assignments(names: tuple[str, ...], assignment: str | None) -> list[str]:
    """The assignment whose shipped release is compared against: the one named, else every assignment whose
    release manifest lists all of `names` as student files."""
    if assignment is not None:
        return [assignment] if _ASSIGNMENT_ID.fullmatch(assignment) else []
    try:
        folders = sorted(p for p in (PACKAGE / "assignments").iterdir() if _ASSIGNMENT_ID.fullmatch(p.name))
    except OSError:
        return []
    owners = []
    for path in folders:
        generated = _json(path / RELEASE_MANIFEST).get("generated")
        if isinstance(generated, dict) and all(f"student_template/{path.name}/{n}" in generated for n in names):
            owners.append(path.name)
    return owners


def _json(path: Path) -> dict:
    try:
        if path.is_symlink() or path.stat().st_size > MAX_MANIFEST_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _sha256(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# -- messages -----------------------------------------------------------------------------------------------------
def _shown(rel: str) -> str:
    """A student's file name for a message: control characters made visible, long names cut."""
    text = "".join(ch if ch.isprintable() else "?" for ch in rel)
    return text if len(text) <= MAX_NAME else text[:MAX_NAME - 1] + "…"


def _listed(rels: list[str], sep: str = ", ") -> str:
    shown = [_shown(r) for r in rels[:MAX_LISTED]]
    if len(rels) > MAX_LISTED:
        shown.append(f"+{len(rels) - MAX_LISTED}")
    return sep.join(shown)


def _nothing(names: tuple[str, ...], links: list[str], others: list[str]) -> tuple[str, str]:
    en = f"no {' or '.join(names)} found"
    zh = f"文件夹中没有 {' 或 '.join(names)}"
    if links:
        en += f"; {_listed(links)}: a symbolic link, not followed (upload the file itself)"
        zh += f"；{_listed(links, '、')} 是符号链接，不予跟随（请上传文件本身）"
    if others:
        en += f" (the folder holds: {_listed(others)})"
        zh += f"（文件夹里有：{_listed(others, '、')}）"
    elif not links:
        en += " (the folder is empty)"
        zh += "（文件夹是空的）"
    return en, zh
