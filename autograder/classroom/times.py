"""When each submission was handed in, from what the download carries: a timestamps CSV (`student,submitted_at`,
ISO 8601 with a UTC offset; it wins), Gradescope's `submission_metadata.yml` (in its "Export Submissions" zip, beside
the `submission_<id>/` folders: `:created_at` and the `:submitters`), nbgrader's `timestamp.txt` in the student's
folder, a Blackboard download name (`..._attempt_2026-11-20-10-30-00_...`, local time: read in `tz`), and Canvas's
`LATE_` marker (late, time unknown). Nothing else (file times change when a zip is extracted).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from datetime import datetime, timezone, tzinfo
from pathlib import Path

from .roster import parse_name


class TimestampError(Exception):
    pass


def parse_time(text: str, tz: tzinfo = timezone.utc) -> datetime:
    """ISO 8601 (`2026-11-20T23:10:00+08:00`, `2026-11-20 23:10:00`), nbgrader's `2026-11-20 15:10:00.5 UTC`, or
    Blackboard's `2026-11-20-23-10-00`; a time without an offset is read in `tz`."""
    text = text.strip()
    if text.endswith(" UTC"):
        text = text[:-4] + "+00:00"
    if len(text) == 19 and text[4] == text[7] == text[10] == text[13] == text[16] == "-":
        text = f"{text[:10]}T{text[11:13]}:{text[14:16]}:{text[17:]}"
    value = datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=tz)


def read_timestamps(path: Path, tz: tzinfo = timezone.utc) -> dict[str, datetime]:
    times = {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        if not {"student", "submitted_at"} <= set(reader.fieldnames or []):
            raise TimestampError(f"{path}:1: the header needs the columns student,submitted_at")
        for line, row in enumerate(reader, start=2):
            try:
                times[row["student"].strip()] = parse_time(row["submitted_at"], tz)
            except (ValueError, AttributeError):
                raise TimestampError(f"{path}:{line}: cannot read the time {row.get('submitted_at')!r} "
                                     "(use ISO 8601, e.g. 2026-11-20T23:10:00+08:00)") from None
    return times


def with_times(entries: list, table: dict[str, datetime] | None = None, tz: tzinfo = timezone.utc) -> list:
    """The entries (still under their download names) with `submitted_at`, `time_source` and `late_marker` filled
    in from what is known; nbgrader's timestamp.txt is looked for beside the graded file. A time the intake already
    found (Gradescope's metadata) is kept unless the timestamps CSV names the entry."""
    out = []
    for entry in entries:
        parsed = parse_name(entry.student)
        stamp = entry.path.parent / "timestamp.txt" if entry.path is not None else Path("/nonexistent")
        at, source = None, ""
        if table and entry.student in table:
            at, source = table[entry.student], "timestamps CSV"
        elif entry.submitted_at is not None or entry.time_source:
            at, source = entry.submitted_at, entry.time_source
        elif stamp.is_file():
            try:
                at, source = parse_time(stamp.read_text(encoding="utf-8", errors="replace")[:100], tz), "timestamp.txt"
            except ValueError:
                source = "timestamp.txt unreadable"
        elif parsed.lms == "blackboard" and parsed.when:
            at, source = parse_time(parsed.when, tz), "Blackboard name"
        out.append(replace(entry, submitted_at=at, time_source=source, late_marker=parsed.late))
    return out


GRADESCOPE_METADATA = "submission_metadata.yml"
GRADESCOPE_SOURCE = "Gradescope submission_metadata.yml"
MAX_METADATA_BYTES = 64 << 20


@dataclass(frozen=True)
class GradescopeSubmission:
    """One `submission_<id>` entry of Gradescope's export metadata."""
    folder: str
    submitters: tuple[tuple[str, str, str], ...]   # (name, email, sid) of each group member
    created_at: datetime | None                    # None: absent or unreadable (see the problems)
    line: int                                      # where the entry starts in the file (1-based)


def read_gradescope_metadata(path: Path, tz: tzinfo = timezone.utc) -> tuple[dict[str, GradescopeSubmission],
                                                                             list[str]]:
    """Gradescope's `submission_metadata.yml`: folder name -> GradescopeSubmission, and the problems met, each
    naming the file and line (an entry whose time cannot be read keeps no time: it is reported, never penalised).
    The YAML is only composed (PyYAML's node graph: no object is built, Ruby tags such as `!ruby/object` are
    ignored, an alias is not expanded) and only `:submitters` (`:name`, `:email`, `:sid`) and `:created_at` are
    read. A file that is not YAML, or not a mapping of submissions, is a TimestampError naming the file."""
    try:
        import yaml
    except ImportError:  # installed with jupytext; without it the export cannot be read
        raise TimestampError(f"{path}: reading Gradescope's metadata needs PyYAML (pip install pyyaml)") from None
    try:
        if path.stat().st_size > MAX_METADATA_BYTES:
            raise TimestampError(f"{path}: larger than {MAX_METADATA_BYTES >> 20} MiB; not read")
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise TimestampError(f"{path}: cannot read it ({e.strerror})") from None
    except UnicodeDecodeError:
        raise TimestampError(f"{path}: not UTF-8 text") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        raise TimestampError(f"{path}{where}: not valid YAML ({e.problem or e.context})") from None
    except (yaml.YAMLError, RecursionError) as e:
        raise TimestampError(f"{path}: not valid YAML ({type(e).__name__})") from None
    if root is None:
        return {}, [f"{path}: empty: no submission times from it"]
    if not isinstance(root, yaml.MappingNode):
        raise TimestampError(f"{path}:{root.start_mark.line + 1}: expected one `submission_<id>:` entry per "
                             "submission (a mapping)")
    found, problems = {}, []
    for key, value in root.value:
        line = key.start_mark.line + 1
        folder = key.value if isinstance(key, yaml.ScalarNode) else ""
        if not folder or not isinstance(value, yaml.MappingNode):
            problems.append(f"{path}:{line}: not a submission entry (`submission_<id>:` with `:submitters` "
                            "and `:created_at`): skipped")
            continue
        fields = {k.value.lstrip(":"): v for k, v in value.value if isinstance(k, yaml.ScalarNode)}
        submitters = []
        people = fields.get("submitters")
        for person in people.value if isinstance(people, yaml.SequenceNode) else ():
            if isinstance(person, yaml.MappingNode):
                got = {k.value.lstrip(":"): _text(v) for k, v in person.value if isinstance(k, yaml.ScalarNode)}
                submitters.append(tuple(got.get(f, "") for f in ("name", "email", "sid")))
        if not submitters:
            problems.append(f"{path}:{line}: {folder} names no submitter")
        created, at = fields.get("created_at"), None
        if _text(created):
            try:
                at = parse_time(created.value, tz)
            except ValueError:
                problems.append(f"{path}:{created.start_mark.line + 1}: cannot read the time {created.value[:60]!r} "
                                f"of {folder}: no late penalty for it")
        else:
            problems.append(f"{path}:{line}: {folder} has no :created_at: no late penalty for it")
        found[folder] = GradescopeSubmission(folder, tuple(submitters), at, line)
    return found, problems


def _text(node) -> str:
    """A YAML scalar's text as written (`~`/`null` -> ""); "" for anything else (a list, a mapping, absent)."""
    import yaml

    if not isinstance(node, yaml.ScalarNode) or node.tag.endswith(":null"):
        return ""
    return node.value.strip()
