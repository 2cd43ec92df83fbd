"""Deadlines and late policy as data: `course.toml`, one table per assignment.

    [lab1]                              # an assignment id
    due = 2026-11-20T23:59:00+08:00
    policy = "percent_per_day"          # none | percent_per_day | percent_per_hour | grace_days | timeline
    percent = 10                        # per started day (or hour) late
    cap = 50                            # the most a penalty takes, in percent of the raw score
    grace_days = 2                      # grace_days: days late without penalty, then `percent` per day
    timeline = [{until = 2026-11-18T23:59:00+08:00, credit = 110}, {until = 2026-11-20T23:59:00+08:00, credit = 100},
                {until = 2026-11-27T23:59:00+08:00, credit = 80}]   # policy "timeline": after the last, 0 %
    [lab1.extensions]
    s1002 = 2026-11-22T23:59:00+08:00   # a student's own due date (the timeline moves with it)

`penalty(...)` is a pure function of the raw score, the submission time and this table: moving a due date and
rewriting the grades (`autograder late`) changes penalties without regrading anything. A submission without a known
time is never penalised: it is reported instead.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

POLICIES = ("none", "percent_per_day", "percent_per_hour", "grace_days", "timeline")


class CourseError(Exception):
    """course.toml cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Deadline:
    due: datetime
    policy: str = "none"
    percent: float = 0.0
    cap: float = 100.0
    grace_days: int = 0
    timeline: tuple[tuple[datetime, float], ...] = ()      # (until, credit %), in order
    extensions: dict[str, datetime] = field(default_factory=dict)

    def due_for(self, student: str) -> datetime:
        return self.extensions.get(student, self.due)


@dataclass(frozen=True)
class Late:
    """What the policy makes of one submission."""
    submitted_at: datetime | None
    due: datetime
    late_by: timedelta | None       # None: on time, or no known time
    penalty: float                  # points taken from the score
    note: str                       # in words, for the feedback and the report


def _aware(value, where: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise CourseError(f"{where}: expected a date and time with its UTC offset, e.g. 2026-11-20T23:59:00+08:00")
    return value


def load_course(path: Path) -> dict[str, Deadline]:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CourseError(f"{path}: cannot read it ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise CourseError(f"{path}: {e}") from None
    deadlines = {}
    for assignment, table in data.items():
        where = f"{path} [{assignment}]"
        if not isinstance(table, dict) or "due" not in table:
            raise CourseError(f"{where}: needs a `due` date")
        policy = table.get("policy", "none")
        if policy not in POLICIES:
            raise CourseError(f"{where}: policy {policy!r} is not one of {', '.join(POLICIES)}")
        timeline = tuple((_aware(step.get("until"), f"{where} timeline"), float(step.get("credit", 0)))
                         for step in table.get("timeline", []))
        if policy == "timeline" and not timeline:
            raise CourseError(f"{where}: policy timeline needs a `timeline` list")
        if any(later[0] <= earlier[0] for earlier, later in zip(timeline, timeline[1:])):
            raise CourseError(f"{where}: timeline steps must be in order of their `until`")
        extensions = {str(k): _aware(v, f"{where} extensions.{k}") for k, v in table.get("extensions", {}).items()}
        deadlines[assignment] = Deadline(_aware(table["due"], f"{where} due"), policy, float(table.get("percent", 0)),
                                         float(table.get("cap", 100)), int(table.get("grace_days", 0)), timeline,
                                         extensions)
    return deadlines


def penalty(score: float, submitted_at: datetime | None, deadline: Deadline, student: str) -> Late:
    due = deadline.due_for(student)
    if submitted_at is None:
        return Late(None, due, None, 0.0, "no submission time known: no late penalty applied")
    late_by = submitted_at - due
    if deadline.policy == "timeline":
        shift = due - deadline.due   # an extension moves the whole timeline
        credit = next((c for until, c in deadline.timeline if submitted_at <= until + shift), 0.0)
        taken = score - score * credit / 100
        return Late(submitted_at, due, late_by if late_by > timedelta(0) else None, taken,
                    f"credit {credit:g} % at {submitted_at.isoformat()}")
    if late_by <= timedelta(0) or deadline.policy == "none":
        return Late(submitted_at, due, None, 0.0, "on time" if late_by <= timedelta(0) else "late; no penalty policy")
    unit = timedelta(hours=1) if deadline.policy == "percent_per_hour" else timedelta(days=1)
    units = math.ceil(late_by / unit)
    if deadline.policy == "grace_days":
        units = max(0, units - deadline.grace_days)
    percent = min(deadline.percent * units, deadline.cap)
    return Late(submitted_at, due, late_by, score * percent / 100,
                f"{_duration(late_by)} late: -{percent:g} %")


def _duration(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


def to_json(deadline: Deadline) -> dict:
    return {"due": deadline.due.isoformat(), "policy": deadline.policy, "percent": deadline.percent,
            "cap": deadline.cap, "grace_days": deadline.grace_days,
            "timeline": [[until.isoformat(), credit] for until, credit in deadline.timeline],
            "extensions": {s: at.isoformat() for s, at in deadline.extensions.items()}}


def from_json(data: dict) -> Deadline:
    return Deadline(datetime.fromisoformat(data["due"]), data["policy"], data["percent"], data["cap"],
                    data["grace_days"], tuple((datetime.fromisoformat(u), c) for u, c in data["timeline"]),
                    {s: datetime.fromisoformat(at) for s, at in data["extensions"].items()})
