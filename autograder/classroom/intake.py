"""Find each student's submission in whatever the instructor downloaded.

Accepted: one file; a folder of per-student folders (any layout inside); a folder of per-student files
(`<id>.py`, `<id>.ipynb`); nbgrader's `submitted/<student>/<assignment>/` (when asked for, or when the folder is
an nbgrader course root: never because a student's folder is named `submitted`); or a zip of any of these, as an LMS
exports it (extracted only after every entry has been checked: no absolute paths, no `..`, no links, size and
count caps). Student id = folder or file name. Inside a student's folder the file to grade is chosen by
`autograder.engine.resolve` (the rule `check` and Gradescope use too). Whatever cannot be graded is kept, with the
reason.
"""
from __future__ import annotations

import stat
import zipfile
from dataclasses import dataclass, replace
from datetime import datetime, timezone, tzinfo
from pathlib import Path

from autograder.engine.resolve import SKIP_DIRS, match, resolve

from .times import GRADESCOPE_METADATA, GRADESCOPE_SOURCE, TimestampError, read_gradescope_metadata

MAX_ZIP_ENTRIES = 20_000
MAX_ZIP_BYTES = 1 << 30
MAX_ZIP_RATIO = 200


class IntakeError(Exception):
    """The input as a whole cannot be used (missing, unsafe zip...)."""


@dataclass(frozen=True)
class Entry:
    student: str
    path: Path | None             # the file to grade, or None when there is none
    problem_en: str = ""
    problem_zh: str = ""
    note_en: str = ""             # e.g. the chosen file is the untouched release (see engine.resolve)
    note_zh: str = ""
    submitted_at: datetime | None = None  # when it was handed in, if anything says so (see classroom/times.py)
    time_source: str = ""
    late_marker: bool = False     # the LMS marked it late (Canvas's LATE_), whatever its time
    submitters: tuple[tuple[str, str, str], ...] = ()  # Gradescope's (name, email, sid) of each group member


LAYOUTS = ("auto", "folders", "nbgrader")
NO_SUBMISSION = "no submission"  # the reason of a roster student's row when the input holds nothing of theirs
NBGRADER_MARKERS = ("nbgrader_config.py", "gradebook.db")


def find_submissions(source: Path, names: tuple[str, ...], workdir: Path, layout: str = "auto",
                     assignment: str | None = None, notes: list[str] | None = None,
                     tz: tzinfo = timezone.utc) -> list[Entry]:
    """Entries sorted by student; `names` are the graded file names (the spec's submission_files).
    `layout`: "folders" (every child of the folder is a student), "nbgrader" (the children of its `submitted/`),
    or "auto" (nbgrader's only for a course root: `submitted/` beside `nbgrader_config.py` or `gradebook.db`).
    `assignment` names the release whose stubs a student's untouched files are recognised by (engine.resolve).
    `notes` receives what the instructor should know about the input (zip name encodings, files that are no
    submission); an input with no submission at all is an IntakeError. Gradescope's `submission_metadata.yml`
    beside the folders gives their times and submitters (times without an offset are read in `tz`)."""
    if layout not in LAYOUTS:
        raise IntakeError(f"unknown layout {layout!r}: use one of {', '.join(LAYOUTS)}")
    source = Path(source)
    if not source.exists() and not source.is_symlink():
        raise IntakeError(f"{source} does not exist")
    if source.is_file() and source.suffix == ".zip":
        source = _unwrap(extract_zip(source, workdir / "unzipped", notes), names)
    if source.is_file():
        student = source.parent.name if source.name in names else source.stem
        return [Entry(student, source)]
    root = _nbgrader_root(source, layout)
    entries, ignored, loose = [], [], []
    for child in sorted(root.iterdir()):
        if child.name.startswith(".") or child.name in SKIP_DIRS or child.name == GRADESCOPE_METADATA:
            continue
        if child.is_symlink():
            entries.append(Entry(child.name, None, "a symbolic link: not followed", "符号链接：不予跟随"))
        elif child.is_dir():
            entries.append(_from_folder(child, names, assignment))
        elif child.suffix in {Path(n).suffix for n in names}:
            entries.append(Entry(child.stem, child))
            loose.append(child.name)
        else:
            ignored.append(child.name)
    if not entries:
        raise IntakeError(f"{source}: no submissions found (expected a folder per student, or files named like "
                          f"{' / '.join(names)}{'; found only ' + ', '.join(ignored[:5]) if ignored else ''})")
    if notes is not None:
        if ignored:
            notes.append(f"ignored {len(ignored)} file(s) that are not submissions: {', '.join(ignored[:5])}"
                         + (" ..." if len(ignored) > 5 else ""))
        if loose and len(loose) < len(entries):
            notes.append(f"graded as students: {', '.join(loose[:5])}" + (" ..." if len(loose) > 5 else "")
                         + " (files beside the student folders)")
    seen = set()
    for e in entries:
        if e.student in seen:
            raise IntakeError(f"student id {e.student!r} appears twice (as a folder and as a file?)")
        seen.add(e.student)
    if (root / GRADESCOPE_METADATA).is_file() and not (root / GRADESCOPE_METADATA).is_symlink():
        entries = _gradescope_times(entries, root / GRADESCOPE_METADATA, tz, notes)
    return sorted(entries, key=lambda e: e.student)


def _gradescope_times(entries: list[Entry], path: Path, tz: tzinfo, notes: list[str] | None) -> list[Entry]:
    """Each `submission_<id>` folder's time and submitters from Gradescope's export metadata (classroom/times.py);
    the folders keep their names here (`gradescope_submitters` names them after their submitters)."""
    try:
        found, problems = read_gradescope_metadata(path, tz)
    except TimestampError as e:
        raise IntakeError(str(e)) from None
    out, missing = [], []
    for e in entries:
        meta = found.get(e.student)
        if meta is None:
            missing.append(e.student)
            out.append(e)
        else:
            out.append(replace(e, submitted_at=meta.created_at, submitters=meta.submitters,
                               time_source=GRADESCOPE_SOURCE if meta.created_at else f"{GRADESCOPE_SOURCE}: no time"))
    if notes is not None:
        notes.append(f"{path.name}: Gradescope's submission times and submitters for "
                     f"{len(entries) - len(missing)} of {len(entries)} submissions")
        notes += problems[:20] + ([f"... and {len(problems) - 20} more problems in {path.name}"]
                                  if len(problems) > 20 else [])
        if missing:
            notes.append(f"{path.name} does not list {', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else "")
                         + ": no submission time for them")
    return out


def gradescope_submitters(entries: list[Entry], roster=None, notes: list[str] | None = None) -> list[Entry]:
    """Entries from Gradescope's export named after who submitted them, instead of `submission_<id>`: with a roster,
    the roster id whose id (or an LMS id) is the submitter's sid, else whose email (or SIS login) is theirs, else
    the submitter's name (left to the roster's name matching, which never guesses between two); without a roster,
    the sid, else the email, else the name. A group submission gives each member an entry of the same file. Other
    entries are unchanged; two entries with one name are an IntakeError naming both."""
    if not any(e.submitters for e in entries):
        return entries
    out, groups, folder_of = [], [], {}
    for e in entries:
        named = [e]
        if e.submitters:
            if len(e.submitters) > 1:
                groups.append(e.student)
            named = []
            for name, email, sid in e.submitters:
                who = _on_roster(roster, email, sid) if roster is not None else None
                who = who or (name if roster is not None and name else "") or sid or email or name or e.student
                named.append(replace(e, student=who))
        for n in named:
            if n.student in folder_of:
                raise IntakeError(f"{GRADESCOPE_METADATA}: two submissions belong to {n.student!r} "
                                  f"({folder_of[n.student]} and {e.student}); keep one of them")
            folder_of[n.student] = e.student
            out.append(n)
    if groups and notes is not None:
        notes.append(f"group submissions, graded once per member: {', '.join(groups[:5])}"
                     + (" ..." if len(groups) > 5 else ""))
    return sorted(out, key=lambda e: e.student)


def _on_roster(roster, email: str, sid: str) -> str | None:
    """The roster id of a Gradescope submitter, by sid (the roster id or an LMS id), then email (or SIS login)."""
    if sid:
        for s in roster.students:
            if sid == s.id or sid in s.lms_ids.values():
                return s.id
    if email:
        folded = email.casefold()
        for s in roster.students:
            if folded in (s.email.casefold(), s.lms_ids.get("sis_login_id", "").casefold()):
                return s.id
    return None


def _nbgrader_root(source: Path, layout: str) -> Path:
    """The folder whose children are the students: `submitted/` in nbgrader's layout, else `source` itself."""
    submitted = source / "submitted"
    if layout == "nbgrader" and not submitted.is_dir():
        raise IntakeError(f"{source} has no submitted/ folder (nbgrader layout)")
    course_root = submitted.is_dir() and any((source / m).is_file() for m in NBGRADER_MARKERS)
    return submitted if layout == "nbgrader" or (layout == "auto" and course_root) else source


def _from_folder(folder: Path, names: tuple[str, ...], assignment: str | None = None) -> Entry:
    found = resolve(folder, names, assignment)
    return Entry(folder.name, found.path, found.reason_en, found.reason_zh, found.note_en, found.note_zh)


UTF8_FLAG = 0x800  # general purpose bit 11: the name is UTF-8


def entry_name(info: zipfile.ZipInfo) -> tuple[str, str]:
    """(name, encoding used) of a zip entry. With the UTF-8 flag set, as zipfile decoded it. Without it, zipfile
    decoded the raw bytes as cp437 (the ZIP standard's default); those bytes are decoded again, in this order, as
    strict UTF-8 (Linux and macOS tools write UTF-8 names without setting the flag), as GB18030 (zips made on
    Chinese Windows) when the bytes decode cleanly, else kept as cp437."""
    if info.flag_bits & UTF8_FLAG:
        return info.filename, "utf-8"
    raw = info.filename.encode("cp437")
    if raw.isascii():
        return info.filename, "ascii"
    for encoding in ("utf-8", "gb18030"):
        try:
            return raw.decode(encoding), f"{encoding} (no UTF-8 flag)"
        except UnicodeDecodeError:
            pass
    return info.filename, "cp437"


def extract_zip(archive: Path, target: Path, notes: list[str] | None = None) -> Path:
    """Check every entry, then extract; refuse the whole archive if any entry is unsafe. Entry names are decoded
    by `entry_name`; `notes` receives which encodings were used (for the run's summary)."""
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile as e:
        raise IntakeError(f"{archive.name} is not a valid zip file: {e}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ZIP_ENTRIES:
            raise IntakeError(f"{archive.name} has {len(infos)} entries; the limit is {MAX_ZIP_ENTRIES}")
        names, used = {}, {}
        for info in infos:
            names[id(info)], encoding = entry_name(info)
            used[encoding] = used.get(encoding, 0) + 1
        if notes is not None and set(used) - {"ascii"}:
            notes.append(f"{archive.name}: entry names decoded as " + ", ".join(
                f"{encoding} ({count})" for encoding, count in sorted(used.items())))
        problems, total = [], 0
        for info in infos:
            name = names[id(info)]
            parts = Path(name.replace("\\", "/")).parts
            mode = info.external_attr >> 16
            if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
                problems.append(f"{name}: absolute path")
            elif ".." in parts:
                problems.append(f"{name}: path goes outside the archive (..)")
            elif stat.S_ISLNK(mode):
                problems.append(f"{name}: symbolic link")
            elif stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: no type recorded (plain file)
                problems.append(f"{name}: special file")
            total += info.file_size
            if info.compress_size and info.file_size / info.compress_size > MAX_ZIP_RATIO and info.file_size > 1 << 20:
                problems.append(f"{name}: compression ratio {info.file_size // info.compress_size}:1 (zip bomb?)")
        if total > MAX_ZIP_BYTES:
            problems.append(f"uncompressed size {total} bytes exceeds {MAX_ZIP_BYTES}")
        if problems:
            raise IntakeError(f"refusing {archive.name}: " + "; ".join(problems[:10]))
        target.mkdir(parents=True, exist_ok=True)
        for info in infos:
            destination = target.joinpath(*Path(names[id(info)].replace("\\", "/")).parts)
            if info.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(destination, "xb") as dst:
                remaining = info.file_size + 1
                while chunk := src.read(min(1 << 20, remaining)):
                    dst.write(chunk)
                    remaining -= len(chunk)
    return target


def _unwrap(root: Path, names: tuple[str, ...]) -> Path:
    """An archive's lone top folder (`submissions/`) is the class folder, unless it is one student's own work."""
    while True:
        children = [c for c in root.iterdir() if c.name not in SKIP_DIRS and not c.name.startswith(".")]
        if len(children) != 1 or not children[0].is_dir() or any(
                match(c.name, names) and not c.is_dir() for c in children[0].iterdir()):
            return root
        root = children[0]
