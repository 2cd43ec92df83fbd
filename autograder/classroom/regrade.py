"""What a regrade changed: whose score moved, by how much, and which checks flipped (after a test fix, a new
reference, a changed submission). Pure: it compares two snapshots of the gradebook (`Gradebook.snapshot`)."""
from __future__ import annotations

Snapshot = dict[str, tuple[float, dict[str, str]]]  # student -> (score, {check name: status})


def diff(before: Snapshot, after: Snapshot) -> dict:
    """{"changed": [{student, before, after, delta, flipped: [[check, status before, status after]]}],
    "new": [students graded for the first time, e.g. a later section's download], "unchanged": count}. Students missing from `after` (not in this
    run's input) are not a change."""
    changed, new, unchanged = [], [], 0
    for student, (score, statuses) in sorted(after.items()):
        old_score, old_statuses = before.get(student, (0.0, {}))
        if not old_statuses or set(old_statuses.values()) == {"not_graded"}:  # first graded now (or still not)
            if set(statuses.values()) != {"not_graded"}:
                new.append(student)
            else:
                unchanged += 1
            continue
        flipped = [[name, old_statuses.get(name, "absent"), status] for name, status in statuses.items()
                   if old_statuses.get(name) != status]
        flipped += [[name, status, "absent"] for name, status in old_statuses.items() if name not in statuses]
        if flipped or abs(score - old_score) > 1e-9:
            changed.append({"student": student, "before": old_score, "after": score,
                            "delta": round(score - old_score, 6), "flipped": flipped})
        else:
            unchanged += 1
    return {"changed": changed, "new": new, "unchanged": unchanged}
