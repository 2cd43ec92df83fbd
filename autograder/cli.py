"""Command line: `autograder release | grade | check | export`. Each command is a thin shell over one module."""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  help="Isolated, diagnosing autograder for the course's assignments (autograder/assignments/<id>/).")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXIT_USAGE, EXIT_SANDBOX = 2, 3


@app.command()
def release(
    check: bool = typer.Option(False, "--check", help="Verify the committed release matches the source; write nothing."),
    assignment: str = typer.Option(None, help="Assignment id (a folder under assignments/); default: every one."),
    root: Path = typer.Option(REPO_ROOT, help="Repository root."),
) -> None:
    """Regenerate student_template/<id>/, solutions/<id>/, dist/<id>/ and the hidden references from assignments/<id>/."""
    from autograder.assignments import discover
    from autograder.release.command import run_release

    ids = [assignment] if assignment else list(discover())
    codes = [run_release(root=root, assignment=one, check=check) for one in ids]
    raise typer.Exit(max(codes, default=0))


def _assignment(given: str | None, path: Path):
    """The --assignment named, else the one the submissions are for (see `autograder.assignments.infer`)."""
    from autograder.assignments import UnknownAssignment, get, infer

    try:
        return get(given) if given else infer(path)
    except UnknownAssignment as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_USAGE)


@app.command()
def grade(
    submissions: Path = typer.Argument(..., help="A file, a folder of students, an nbgrader course root, or a zip."),
    out: Path = typer.Option(Path("build/grades"), "--out", "-o", help="Output folder (gradebook, CSV, feedback, report)."),
    assignment: str = typer.Option(None, help="Assignment id; default: the one the submissions' file names are for."),
    jobs: int = typer.Option(os.cpu_count() or 2, "--jobs", "-j", min=1, help="Submissions graded at once."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run: keep results whose file and checks are unchanged."),
    force: bool = typer.Option(False, "--force", help="Regrade everything, discarding earlier results."),
    no_sandbox: bool = typer.Option(False, "--no-sandbox", help="Trusted code only: run without isolation."),
    memory_mib: int = typer.Option(None, "--memory-mib", min=256, help="Memory cap per submission (MiB; default: "
                                   "the assignment's, else 2048)."),
    timeout: float = typer.Option(None, "--timeout", min=1, help="Wall-clock budget per submission (s; default: the "
                                  "assignment's, else 90)."),
    call_timeout: float = typer.Option(None, "--call-timeout", min=0.5, help="Wall-clock limit per call into "
                                       "student code (s; default: the assignment's, else 10)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or summary table."),
    layout: str = typer.Option("auto", "--layout", help="auto | folders | nbgrader. auto: nbgrader's submitted/ "
                               "layout only for a course root (submitted/ beside nbgrader_config.py or gradebook.db)."),
    roster: Path = typer.Option(None, "--roster", help="roster.csv (id,name[,email,section,canvas_id,sis_user_id,"
                                "sis_login_id,moodle_username]): submissions are matched to it by LMS names, ids or "
                                "names, and every student without one gets a row."),
    course: Path = typer.Option(None, "--course", help="course.toml: the assignment's due date, extensions and late "
                                "policy (see autograder/classroom/late.py)."),
    timestamps: Path = typer.Option(None, "--timestamps", help="CSV student,submitted_at (ISO 8601): submission "
                                    "times, for the late policy."),
) -> None:
    """Grade one submission or a whole class into OUT."""
    from autograder.sandbox.client import Sandbox, SandboxUnavailable  # no torch yet: the zygote starts first

    if resume and force:
        raise typer.BadParameter("--resume and --force exclude each other")
    if layout not in ("auto", "folders", "nbgrader"):
        raise typer.BadParameter("--layout is auto, folders or nbgrader")
    spec = _assignment(assignment, submissions)
    class_list = _roster(roster)
    deadline, times = _deadline(course, timestamps, spec.id)
    given = {"memory_bytes": memory_mib << 20 if memory_mib else None, "total_seconds": timeout,
             "call_seconds": call_timeout}
    limits = dataclasses.replace(spec.default_limits(), **{k: v for k, v in given.items() if v is not None})
    secrets = [str(out.resolve()), str(submissions.resolve())]
    try:
        with Sandbox(limits, isolate=not no_sandbox, secrets=secrets, slots=2 * jobs,
                     forbidden=list(spec.forbidden)) as sandbox:
            _grade(submissions, out, spec, limits, sandbox, not no_sandbox, jobs,
                   "resume" if resume else "force" if force else "new", quiet, layout, class_list, deadline, times)
    except SandboxUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_SANDBOX)
    _leave_now(0)


def _leave_now(code: int) -> None:
    """Everything is written, closed and flushed: exit without the interpreter's teardown of torch and
    matplotlib (about half a second of module clean-up that nothing needs)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _roster(path: Path | None):
    from autograder.classroom.roster import RosterError, load_roster

    try:
        return load_roster(path) if path is not None else None
    except RosterError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_USAGE)


def _deadline(course: Path | None, timestamps: Path | None, assignment: str):
    """(the assignment's Deadline or None, the timestamps CSV's times or None); exit 2 naming what is wrong."""
    from datetime import timezone

    from autograder.classroom.late import CourseError, load_course
    from autograder.classroom.times import TimestampError, read_timestamps

    try:
        deadline = None
        if course is not None:
            deadlines = load_course(course)
            if assignment not in deadlines:
                raise CourseError(f"{course} has no [{assignment}] table")
            deadline = deadlines[assignment]
        tz = deadline.due.tzinfo if deadline is not None else timezone.utc
        return deadline, read_timestamps(timestamps, tz) if timestamps is not None else None
    except (CourseError, TimestampError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_USAGE)


def _grade(submissions, out, assignment, limits, sandbox, isolate, jobs, mode, quiet, layout="auto",
           roster=None, deadline=None, timestamps=None) -> None:
    """The part of `grade` that runs while the sandbox's zygote is importing torch."""
    from autograder.engine.submission import skip_iri_grammar

    skip_iri_grammar()  # before nbformat is imported below
    from autograder.classroom.grade_class import ClassRun, GradebookExists
    from autograder.classroom.intake import IntakeError
    from autograder.engine.checks import load_suite
    from autograder.report.render import visible_controls
    from autograder.report.summary import print_summary
    from autograder.report.write import write_outputs, write_student

    suite = load_suite(assignment)
    written: set[str] = set()

    def write_now(result) -> None:  # each student's files are written while the others are graded
        write_student(out, result)
        written.add(result.student)

    run = ClassRun(submissions, out, suite, limits, isolate=isolate, jobs=jobs, mode=mode, show_progress=not quiet,
                   sandbox=sandbox, on_result=write_now, layout=layout, roster=roster, deadline=deadline,
                   timestamps=timestamps)
    try:
        results, stats = run.grade()
    except (IntakeError, GradebookExists, FileNotFoundError) as e:  # may quote file names from an LMS zip
        typer.echo(f"error: {visible_controls(str(e))}", err=True)
        raise typer.Exit(EXIT_USAGE)
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: finished submissions are saved in {out}; continue with --resume", err=True)
        raise typer.Exit(130)
    paths = write_outputs(out, suite, results, stats, already_written=written)
    if not quiet:
        print_summary(suite, results, stats, paths)


@app.command()
def check(
    path: Path = typer.Argument(Path("."), help="Your assignment folder (or the file you wrote)."),
    lang: str = typer.Option(None, "--lang", help="zh or en (default: the course's language)."),
    plot: bool = typer.Option(False, "--plot", help="Also save pictures (PNG) of your results next to your file, "
                              "when the assignment has them."),
    assignment: str = typer.Option(None, help="Assignment id; default: the one your folder's release is for."),
) -> None:
    """Students: run the public tests on your own code, offline, and see what to fix."""
    from autograder.student.check import run_check_command

    _leave_now(run_check_command(path=path, lang=lang, plot=plot, assignment=assignment))


@app.command()
def export(
    out: Path = typer.Argument(..., help="The OUT folder of `autograder grade` (its gradebook.sqlite)."),
    to: str = typer.Option(..., "--to", help="canvas | moodle | blackboard"),
    roster: Path = typer.Option(..., "--roster", help="roster.csv: one row per student, with the LMS's ids."),
    assignment: str = typer.Option(None, help="Assignment id; default: the one the gradebook holds."),
    title: str = typer.Option(None, "--title", help="The column's name in the LMS (default: the assignment id)."),
    lms_id: str = typer.Option(None, "--lms-id", help="The LMS's own id of the assignment column (Canvas "
                               "assignment id, Blackboard column id); without it the LMS creates a new column."),
    file: Path = typer.Option(None, "--file", help="Where to write (default: OUT/export-<to>.csv)."),
) -> None:
    """Instructors: the gradebook's scores as a file Canvas, Moodle or Blackboard imports."""
    from autograder.classroom.export import ExportError, export as make_export

    class_list = _roster(roster)
    book, suite = _open_gradebook(out, assignment)
    try:
        results = book.results(suite.assignment)
    finally:
        book.close()
    try:
        made = make_export(to, results, class_list, title or suite.assignment, suite.max_score, lms_id)
    except ExportError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_USAGE)
    target = file or out / f"export-{to}.csv"
    target.write_text(made.text, encoding="utf-8", newline="")
    typer.echo(f"{target}: {len(class_list.students)} students ({to})")
    if made.left_out:
        typer.echo(f"not on the roster, left out ({len(made.left_out)}): {', '.join(made.left_out)}")


@app.command()
def override(
    out: Path = typer.Argument(..., help="The OUT folder of `autograder grade` (its gradebook.sqlite)."),
    student: str = typer.Option(..., "--student", help="The student's id, as in grades.csv."),
    why: str = typer.Option(..., "--why", help="The reason, shown to the student in their feedback."),
    by: str = typer.Option(..., "--by", help="Who makes the change (kept in the gradebook and shown)."),
    check: str = typer.Option("", "--check", help="A check's name; default: the submission's total."),
    score: float = typer.Option(None, "--score", help="The new score; without it the override is a comment."),
    remove: bool = typer.Option(False, "--remove", help="Remove this student's override of --check instead."),
    assignment: str = typer.Option(None, help="Assignment id; default: the one the gradebook holds."),
) -> None:
    """Instructors: change a score or add a comment by hand; it survives regrades and shows in the feedback, the
    report and every export. OUT's files are rewritten from the gradebook (nothing is regraded)."""
    book, suite = _open_gradebook(out, assignment)
    try:
        if student not in {r.student for r in book.results(suite.assignment)}:
            typer.echo(f"error: no student {student!r} in {out}", err=True)
            raise typer.Exit(EXIT_USAGE)
        if check and check not in {c.name for c in suite.checks}:
            typer.echo(f"error: {suite.assignment} has no check {check!r}", err=True)
            raise typer.Exit(EXIT_USAGE)
        if remove:
            if not book.remove_override(suite.assignment, student, check):
                typer.echo(f"error: {student} has no override of {check or 'the total'}", err=True)
                raise typer.Exit(EXIT_USAGE)
        else:
            book.override(suite.assignment, student, check, score, why, by)
        results = _rewrite(out, suite, book)
    finally:
        book.close()
    changed = next(r for r in results if r.student == student)
    typer.echo(f"{student}: {changed.score:g}/{changed.max_score:g} ({'removed' if remove else 'recorded'}); "
               f"{out} rewritten")


@app.command()
def late(
    out: Path = typer.Argument(..., help="The OUT folder of `autograder grade` (its gradebook.sqlite)."),
    course: Path = typer.Option(..., "--course", help="course.toml: due date, extensions, late policy."),
    timestamps: Path = typer.Option(None, "--timestamps", help="CSV student,submitted_at: times to record."),
    assignment: str = typer.Option(None, help="Assignment id; default: the one the gradebook holds."),
) -> None:
    """Instructors: apply (or change) the due date, extensions and late policy; penalties are recomputed from the
    recorded submission times and OUT's files rewritten, without regrading anything."""
    book, suite = _open_gradebook(out, assignment)
    try:
        deadline, times = _deadline(course, timestamps, suite.assignment)
        book.set_deadline(suite.assignment, deadline)
        for student, at in (times or {}).items():
            book.record_time(suite.assignment, student, at, "timestamps CSV", False)
        results = _rewrite(out, suite, book)
    finally:
        book.close()
    penalised = [r for r in results if r.late.get("penalty")]
    unknown = [r.student for r in results if r.graded and r.late and r.late["submitted_at"] is None]
    typer.echo(f"{len(penalised)} late penalties, {len(unknown)} without a known submission time; {out} rewritten")


def _open_gradebook(out: Path, assignment: str | None):
    """(the Gradebook in OUT, the suite of the assignment it holds, or of --assignment); exit 2 when there is none."""
    from autograder.assignments import get
    from autograder.classroom.grade_class import GRADEBOOK
    from autograder.classroom.gradebook import Gradebook
    from autograder.engine.checks import load_suite

    if not (out / GRADEBOOK).is_file():
        typer.echo(f"error: {out / GRADEBOOK} does not exist: grade the class into {out} first", err=True)
        raise typer.Exit(EXIT_USAGE)
    book = Gradebook(out / GRADEBOOK)
    held = book.assignments()
    if assignment is None and len(held) != 1:
        book.close()
        typer.echo(f"error: the gradebook holds {', '.join(held) or 'no assignment'}: say --assignment", err=True)
        raise typer.Exit(EXIT_USAGE)
    return book, load_suite(get(assignment or held[0]))


def _rewrite(out: Path, suite, book) -> list:
    """Rewrite OUT's grades, feedback and report from the gradebook (nothing is regraded)."""
    import json

    from autograder.report.write import write_outputs

    results = book.results(suite.assignment)
    try:
        stats = json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stats = {}
    write_outputs(out, suite, results, stats)
    return results
