"""When each submission was handed in, from what the download carries: a timestamps CSV (`student,submitted_at`,
ISO 8601 with a UTC offset; it wins), nbgrader's `timestamp.txt` in the student's folder, a Blackboard download name
(`..._attempt_2026-11-20-10-30-00_...`, local time: read in `tz`), and Canvas's `LATE_` marker (late, time unknown).
Nothing else (file times change when a zip is extracted)."""
from __future__ import annotations

import csv
from dataclasses import replace
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
    in from what is known; nbgrader's timestamp.txt is looked for beside the graded file."""
    out = []
    for entry in entries:
        parsed = parse_name(entry.student)
        stamp = entry.path.parent / "timestamp.txt" if entry.path is not None else Path("/nonexistent")
        at, source = None, ""
        if table and entry.student in table:
            at, source = table[entry.student], "timestamps CSV"
        elif stamp.is_file():
            try:
                at, source = parse_time(stamp.read_text(encoding="utf-8", errors="replace")[:100], tz), "timestamp.txt"
            except ValueError:
                source = "timestamp.txt unreadable"
        elif parsed.lms == "blackboard" and parsed.when:
            at, source = parse_time(parsed.when, tz), "Blackboard name"
        out.append(replace(entry, submitted_at=at, time_source=source, late_marker=parsed.late))
    return out
