"""The table printed at the end of `autograder grade`."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from autograder.engine.checks import Suite
from autograder.engine.results import SubmissionResult

from .render import num, terminal_text, visible_controls


def print_summary(suite: Suite, results: list[SubmissionResult], stats: dict, paths: dict[str, Path]) -> None:
    """One row per student; ids and messages (the students' words) through `terminal_text`."""
    table = Table(title=f"{suite.assignment}: {len(results)} submissions")
    for column in ("student", "score", "passed", "problems"):
        table.add_column(column, justify="right" if column == "score" else "left")
    for r in results:
        passed = sum(c.status == "passed" for c in r.checks)
        if not r.graded:
            problems = r.error_en
        else:
            counts = {}
            for c in r.checks:
                if c.status != "passed":
                    counts[c.status] = counts.get(c.status, 0) + 1
            problems = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        table.add_row(terminal_text(r.student), f"{num(r.score)}/{num(r.max_score)}", f"{passed}/{len(r.checks)}",
                      terminal_text(problems))
    console = Console(highlight=False)
    console.print(table)
    per = stats["seconds"] / stats["graded"] if stats.get("graded") else 0.0
    console.print(f"graded {stats.get('graded', 0)}, kept {stats.get('skipped', 0)} unchanged "
                  f"in {stats.get('seconds', 0.0):.1f} s ({per * 1000:.0f} ms per submission)")
    if isolation := stats.get("isolation"):
        console.print(f"isolation tier: {isolation['tier']}" + ("" if not isolation["lacks"] else
                      "; lacking: " + "; ".join(isolation["lacks"])), markup=False)
    if stats.get("worker_peak_bytes"):
        console.print(f"largest worker: {stats['worker_peak_bytes'] / 2**20:.0f} MiB of its own memory "
                      f"(cap {stats['worker_cap_bytes'] / 2**20:.0f} MiB)")
    if regrade := stats.get("regrade"):
        changed = regrade["changed"]
        console.print(f"since the last run: {len(changed)} score(s) changed, {regrade['unchanged']} unchanged, "
                      f"{len(regrade['new'])} new", markup=False)
        if changed:
            diff = Table(title="regrade: what changed")
            for column in ("student", "before", "after", "change", "checks that flipped"):
                diff.add_column(column)
            for c in changed:
                flips = ", ".join(f"{name} {old}→{new}" for name, old, new in c["flipped"])
                diff.add_row(terminal_text(c["student"]), num(c["before"]), num(c["after"]),
                             f"{c['delta']:+g}", terminal_text(flips))
            console.print(diff)
    for note in stats.get("intake", []):
        console.print(f"note: {visible_controls(note)}", markup=False)
    if roster := stats.get("roster"):
        if roster["no_submission"]:
            console.print(f"no submission ({len(roster['no_submission'])}): "
                          f"{visible_controls(', '.join(roster['no_submission']))}", markup=False)
        if roster["unknown"]:
            console.print(f"not on the roster, graded under their own names ({len(roster['unknown'])}): "
                          f"{visible_controls(', '.join(roster['unknown']))}", markup=False)
        for name, ids in roster["ambiguous"].items():
            console.print(f"fits more than one roster entry ({', '.join(ids)}), graded under its own name: "
                          f"{visible_controls(name)}", markup=False)
    for name, path in paths.items():
        console.print(f"{name}: {path}", markup=False)
