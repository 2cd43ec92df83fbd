"""One package per assignment; this module is how everything else finds them.

    autograder/assignments/<id>/
        spec.py                 ASSIGNMENT = Assignment(...): names, graded functions, forbidden APIs, texts (no torch)
        public_checks.py        the public checks (`@check(visibility="public")`): released to students in their
                                checker, so they import only autograder.public and read only public_facts.json
        public_facts.py         build(solution): the public inputs, the solution's results and each catalogued
                                mistake's results on them (written to public_facts.json by the release)
        checks.py               the hidden checks (`@check`, see autograder/public/check.py)
        cases.py                build_references(solution, seed): each student's hidden inputs and expected outputs
        diagnosis.py            known mistakes, named from the student's results
        plots.py                optional: save_check_plot(session, path) -> path, for `autograder check --plot`
        reference_solution.py   written by `autograder release` (the clean solution); never released to students
        release_manifest.json   written by `autograder release` (hashes of the released stubs)
        public_facts.json       written by `autograder release` (see public_facts.py)

`discover()` scans this folder: a sub-folder with a `spec.py` is an assignment. The engine, sandbox, release,
student check, report and integrations know an assignment only through its `Assignment` and these modules; a test
(tests/test_chapter_names.py) fails when a chapter's name or API appears anywhere else in the package.
Instructor-only material: never released to students.
"""
from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from autograder.public.text import Text

HERE = Path(__file__).resolve().parent
_ID = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True, kw_only=True)
class Assignment:
    """What the grader knows about an assignment before torch is imported (the sandbox starts with it)."""
    id: str                          # the folder name under assignments/ and autograder/assignments/
    title: Text
    module: str                      # the graded file in the module form, e.g. "<id>.py"
    notebook: str | None = None      # the graded file in the notebook form, or None
    functions: tuple[str, ...]       # what students implement (functions or classes), the checks' `function`s
    forbidden: Mapping[str, str] = field(default_factory=dict)  # API (or op:<glob>) -> why; see sandbox/forbid.py
    hidden_topics: Text              # for students: what the hidden tests cover beyond the public ones
    limits: Mapping[str, float] = field(default_factory=dict)  # this assignment's defaults for sandbox/limits.py
    # Scoring policy for code that computes nothing: when True, a function's structural checks (`kind="structural"`:
    # shapes, dtypes, inputs unchanged) count only if at least one of its value checks passes, so placeholders of
    # the right shape (zeros) earn 0 for that function (engine/runner.py `apply_structural_policy`; stated in the
    # handout). False: every passed check counts on its own.
    structural_needs_values: bool = True

    def __post_init__(self):
        if not _ID.fullmatch(self.id):
            raise ValueError(f"assignment id {self.id!r}: lower-case letters, digits and _ only")
        if not self.module.endswith(".py") or (self.notebook is not None and not self.notebook.endswith(".ipynb")):
            raise ValueError(f"{self.id}: module must be a .py file and notebook an .ipynb file")
        if not self.functions:
            raise ValueError(f"{self.id}: no graded functions")
        object.__setattr__(self, "forbidden", MappingProxyType(dict(self.forbidden)))
        from autograder.sandbox.limits import Limits  # torch-free

        unknown = set(self.limits) - set(Limits.__dataclass_fields__)
        if unknown:
            raise ValueError(f"{self.id}: unknown limits {sorted(unknown)}; see autograder/sandbox/limits.py")
        object.__setattr__(self, "limits", MappingProxyType(dict(self.limits)))

    def default_limits(self):
        """The sandbox limits of this assignment: Limits' defaults, then the spec's `limits`."""
        from autograder.sandbox.limits import Limits

        return Limits(**self.limits)

    @property
    def submission_files(self) -> tuple[str, ...]:
        """The graded file names, module form first (the order the resolver prefers)."""
        return (self.module,) + ((self.notebook,) if self.notebook else ())

    @property
    def module_name(self) -> str:
        """The graded file's module name, as the student's own code may refer to it (`import <name>`)."""
        return Path(self.module).stem

    @property
    def package(self) -> str:
        return f"{__name__}.{self.id}"

    @property
    def directory(self) -> Path:
        return HERE / self.id

    def public_info(self) -> dict:
        """What the released checker is told about the assignment (written into public_facts.json)."""
        return {"id": self.id, "title": {"zh": self.title.zh, "en": self.title.en}, "module": self.module,
                "notebook": self.notebook, "functions": list(self.functions), "default_lang": "zh",
                "hidden_topics": {"zh": self.hidden_topics.zh, "en": self.hidden_topics.en},
                "forbidden": sorted(api for api in self.forbidden if not api.startswith("op:"))}

    def part(self, name: str):
        """The assignment's module `name` (checks, cases, diagnosis, plots, ...), or None when it has none."""
        if not (self.directory / f"{name}.py").is_file():
            return None
        return importlib.import_module(f"{self.package}.{name}")


class UnknownAssignment(LookupError):
    pass


def discover() -> dict[str, Assignment]:
    """Every assignment of this package, by id, in id order."""
    found = {}
    for folder in sorted(HERE.iterdir()):
        if (folder / "spec.py").is_file() and _ID.fullmatch(folder.name):
            spec = importlib.import_module(f"{__name__}.{folder.name}.spec").ASSIGNMENT
            if spec.id != folder.name:
                raise ValueError(f"{folder / 'spec.py'}: id {spec.id!r} is not its folder's name {folder.name!r}")
            found[spec.id] = spec
    return found


def get(assignment: str) -> Assignment:
    known = discover()
    if assignment not in known:
        raise UnknownAssignment(f"no assignment {assignment!r}; known: {', '.join(known) or 'none'}")
    return known[assignment]


def infer(path: Path) -> Assignment:
    """The assignment a submission (a file, a student's folder or a class folder) is for: the `id` of a release
    manifest.json in the folder, else the one assignment whose graded file names (or their LMS copies, see
    engine/resolve.py) appear under it. Raises UnknownAssignment, naming the candidates, when that is not one."""
    from autograder.engine.resolve import MANIFEST, match

    known = discover()
    path = Path(path)
    if path.is_dir() and (path / MANIFEST).is_file():
        try:
            named = json.loads((path / MANIFEST).read_text(encoding="utf-8")).get("id")
        except (OSError, ValueError, AttributeError):
            named = None
        if named in known:
            return known[named]
    names = _names_under(path) if path.is_dir() else _zipped_names(path) if path.suffix == ".zip" else [path.name]
    # an LMS prepends to the file's own name (Canvas `lastfirst_userid_subid_<file>`): its tails count too
    names = [tail for n in names for tail in [n, *(n[i + 1:] for i, ch in enumerate(n) if ch == "_")]]
    hits = [a for a in known.values() if any(match(n, a.submission_files) for n in names)]
    if len(hits) == 1:
        return hits[0]
    which = ", ".join(a.id for a in (hits or known.values()))
    raise UnknownAssignment(f"cannot tell which assignment {path} is for ({'several match' if hits else 'no graded file found'}):"
                            f" say --assignment ({which})")


def _names_under(folder: Path, limit: int = 5000) -> list[str]:
    """File names under `folder` (bounded: a class folder can hold thousands), with the names inside its zips."""
    names = []
    for index, entry in enumerate(folder.rglob("*")):
        if index >= limit:
            break
        names += _zipped_names(entry) if entry.suffix == ".zip" and entry.is_file() else [entry.name]
    return names


def _zipped_names(archive: Path, limit: int = 5000) -> list[str]:
    """The base names of a zip's members (an LMS download); [] for a file that is not a readable zip."""
    import zipfile

    try:
        with zipfile.ZipFile(archive) as z:
            return [name.rstrip("/").rsplit("/", 1)[-1] for name in z.namelist()[:limit]]
    except (OSError, zipfile.BadZipFile):
        return []
