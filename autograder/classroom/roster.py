"""The class list, and which student a submission belongs to.

    roster.csv:  id,name,email,section[,canvas_id,sis_user_id,sis_login_id,moodle_username]
    roster = load_roster(Path("roster.csv"))        # RosterError naming the line on a bad file
    who = roster.match("wangfang_LATE_1003_55503_lab1.py")   # -> Match(student, how, late), Ambiguous or None

A submission's name (the folder or file an LMS download gives it) is read by the LMS naming conventions:
Canvas `lastfirst_[LATE_]userid_subid_filename`, Moodle `Full Name_participantid_assignsubmission_file_` and
Blackboard `Assignment_username_attempt_datetime_filename`. It then matches a roster entry by an id (the roster
id, or one of its LMS ids), else by name (case, spaces and punctuation ignored; Canvas's `lastfirst` form too). A
name that fits two entries matches neither (`Ambiguous`): saying who is better left to the instructor.
"""
from __future__ import annotations

import csv
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

ID_COLUMNS = ("canvas_id", "sis_user_id", "sis_login_id", "moodle_username")
REQUIRED = ("id", "name")
_CANVAS = re.compile(r"^(?P<name>[a-z]+)_(?P<late>LATE_)?(?P<user>\d+)_(?P<sub>\d+)_(?P<file>.+)$")
_MOODLE = re.compile(r"^(?P<name>.+?)_(?P<participant>\d+)_assignsubmission_(?:file|onlinetext)_?$")
_BLACKBOARD = re.compile(r"^(?P<assignment>.+?)_(?P<user>[^_]+)_attempt_(?P<when>\d{4}(?:-\d{2}){5})(?:_(?P<file>.+))?$")


class RosterError(Exception):
    """The roster cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Student:
    id: str
    name: str
    email: str = ""
    section: str = ""
    lms_ids: dict[str, str] = field(default_factory=dict, compare=False)   # column -> value, for the columns given


@dataclass(frozen=True)
class Parsed:
    """What a submission's name says: the LMS it came from, an id or a name, and Canvas's LATE marker."""
    lms: str                 # canvas | moodle | blackboard | plain
    key: str                 # the id (Canvas user id, Blackboard username) or the name (Moodle) it carries
    by: str                  # "id" or "name"
    late: bool = False
    canvas_name: str = ""    # Canvas's lastfirst
    when: str = ""           # Blackboard's attempt time, as written (local time)


@dataclass(frozen=True)
class Match:
    student: Student
    how: str                 # e.g. "canvas_id", "id", "name"
    late: bool = False


@dataclass(frozen=True)
class Ambiguous:
    candidates: tuple[Student, ...]


def parse_name(name: str) -> Parsed:
    """Read an LMS download's folder or file name."""
    stem = name.rsplit(".", 1)[0] if "." in name and not _MOODLE.match(name) else name
    if m := _CANVAS.match(name):
        return Parsed("canvas", m["user"], "id", bool(m["late"]), m["name"])
    if m := _MOODLE.match(name):
        return Parsed("moodle", m["name"], "name")
    if m := _BLACKBOARD.match(name):
        return Parsed("blackboard", m["user"], "id", when=m["when"])
    return Parsed("plain", stem, "id")


def _folded(text: str) -> str:
    """A name for comparison: NFKC, case-folded, without spaces, punctuation or marks."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text)).casefold()
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")


@dataclass(frozen=True)
class Roster:
    path: Path
    students: tuple[Student, ...]

    def get(self, student_id: str) -> Student | None:
        return next((s for s in self.students if s.id == student_id), None)

    def match(self, name: str) -> Match | Ambiguous | None:
        """The roster entry a submission called `name` belongs to (see the module's docstring)."""
        parsed = parse_name(name)
        for student in self.students:
            for column in ("id", *ID_COLUMNS):
                value = student.id if column == "id" else student.lms_ids.get(column, "")
                if value and value == parsed.key and parsed.by == "id":
                    return Match(student, column, parsed.late)
        wanted = {_folded(parsed.key)} if parsed.by == "name" else {_folded(parsed.key)} - {""}
        if parsed.canvas_name:
            wanted.add(_folded(parsed.canvas_name))
        hits = [s for s in self.students if _folded(s.name) in wanted or _canvas_form(s.name) in wanted]
        if len(hits) == 1:
            return Match(hits[0], "name", parsed.late)
        if len(hits) > 1:
            return Ambiguous(tuple(hits))
        return None


def _canvas_form(name: str) -> str:
    """Canvas's `lastfirst` of a roster name: "Li Wei" -> "weili"; a name without spaces (王芳) stays whole."""
    parts = name.split()
    return _folded("".join(parts[-1:] + parts[:-1])) if len(parts) > 1 else _folded(name)


def load_roster(path: Path) -> Roster:
    """Read roster.csv (UTF-8, with or without BOM). Refuses, naming the line: no such file, a missing `id` or
    `name` column, an empty id, a duplicate id, a duplicate LMS id."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise RosterError(f"{path}: cannot read the roster ({e.strerror})") from None
    except UnicodeDecodeError:
        raise RosterError(f"{path}: not UTF-8 text; save the roster as UTF-8 CSV") from None
    reader = csv.DictReader(text.splitlines())
    columns = [c.strip().lower() for c in reader.fieldnames or []]
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise RosterError(f"{path}:1: the header needs the column(s) {', '.join(missing)} (found {', '.join(columns)})")
    students, seen = [], {}
    for line, row in enumerate(reader, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
        if not any(row.values()):
            continue
        if not row.get("id"):
            raise RosterError(f"{path}:{line}: empty id")
        lms = {c: row[c] for c in ID_COLUMNS if row.get(c)}
        for key in [("id", row["id"]), *lms.items()]:
            if key in seen:
                raise RosterError(f"{path}:{line}: {key[0]} {key[1]!r} is already used on line {seen[key]}")
            seen[key] = line
        students.append(Student(row["id"], row.get("name", ""), row.get("email", ""), row.get("section", ""), lms))
    if not students:
        raise RosterError(f"{path}: no students")
    return Roster(path, tuple(students))


def apply_roster(entries: list, roster: Roster) -> tuple[list, dict]:
    """Entries renamed to their roster ids, plus an entry "no submission" for every student without one.
    Returns (entries, facts): `unknown` (submissions matching no one, graded under their own names), `ambiguous`
    (name -> the ids it fits), `matched_by` (how each was matched, counted). Two submissions for one student are
    an error naming both: which one counts is the instructor's call."""
    from dataclasses import replace

    from .intake import NO_SUBMISSION, Entry, IntakeError

    out, owner, facts = [], {}, {"unknown": [], "ambiguous": {}, "matched_by": {}, "no_submission": []}
    for entry in entries:
        found = roster.match(entry.student)
        if isinstance(found, Match):
            if found.student.id in owner:
                raise IntakeError(f"two submissions belong to roster id {found.student.id!r} ({found.student.name}): "
                                  f"{owner[found.student.id]!r} and {entry.student!r}; keep one of them")
            owner[found.student.id] = entry.student
            facts["matched_by"][found.how] = facts["matched_by"].get(found.how, 0) + 1
            out.append(replace(entry, student=found.student.id))
        else:
            if isinstance(found, Ambiguous):
                facts["ambiguous"][entry.student] = [s.id for s in found.candidates]
            else:
                facts["unknown"].append(entry.student)
            out.append(entry)
    for student in roster.students:
        if student.id not in owner:
            facts["no_submission"].append(student.id)
            out.append(Entry(student.id, None, NO_SUBMISSION, "未提交"))
    ids = [e.student for e in out]
    clash = sorted({i for i in ids if ids.count(i) > 1})
    if clash:
        raise IntakeError(f"submission name(s) {', '.join(map(repr, clash))} equal a roster id of another student")
    return sorted(out, key=lambda e: e.student), facts
