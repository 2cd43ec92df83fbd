"""Student ids (folder and file names) and messages (exceptions, printed output) are data, never markup: in
grades.csv, the terminal, Markdown feedback, file names and intake (issue 10, item 5). Real outputs throughout:
results are written with `write_outputs`, Markdown is parsed with markdown-it-py, the summary is printed by rich."""
from __future__ import annotations

import base64
import csv
import hashlib
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from conftest import ROOT

from autograder.classroom.intake import IntakeError, find_submissions
from autograder.engine.checks import load_suite
from autograder.engine.results import CheckResult, SubmissionResult
from autograder.report.render import file_stem
from autograder.report.sortable import SORT_SCRIPT
from autograder.report.summary import print_summary
from autograder.report.write import write_outputs

SUITE = load_suite("attention")
NAMES = SUITE.submission_files

HOSTILE_IDS = ["a\rb", "c\nd", '=HYPERLINK("http://x","y")', "+1", "-1", "@SUM(A1)", "\tx", "\x1b[31mred",
               "[bold red]x[/]", "..\\..\\x", "../../y", ".", "..", "", "nul\0byte", "\u202eevil", "z" * 300,
               "[click](http://evil)", "王芳", "ok0"]
HOSTILE_MESSAGES = ["\n## Score: 20 / 20", "[click](http://evil)", "<script>alert(1)</script>", "![img](x)",
                    "| a | b |\n|---|---|", "`code` **bold** <b>html</b> &amp;", "1. list\n- item\n> quote"]
MESSAGE = " ".join(HOSTILE_MESSAGES)


def result(student: str, message: str = MESSAGE, graded: bool = True) -> SubmissionResult:
    """A result with every check failed by `message` (graded), or one that could not be graded at all."""
    checks = [CheckResult(c.name, c.function, 0.0, c.points, "failed" if graded else "not_graded", c.visibility,
                          c.zh, c.en, detail_zh=message, detail_en=message) for c in SUITE.checks]
    checks[0].status, checks[0].score = "passed", checks[0].max_score
    return SubmissionResult(student, SUITE.assignment, "attention.py", None, checks[0].score, SUITE.max_score,
                            checks, error_en="" if graded else message, error_zh="" if graded else message,
                            output="```\n## printed heading\n" + message)


def write_class(out, ids=HOSTILE_IDS) -> list[SubmissionResult]:
    out.mkdir(exist_ok=True)
    results = [result(s, graded=i % 2 == 0) for i, s in enumerate(ids)]
    write_outputs(out, SUITE, results, {"graded": len(results), "skipped": 0, "seconds": 1.0})
    return results


def strict_rfc4180_records(data: bytes) -> list[list[str]]:
    """RFC 4180 read strictly: records end with CRLF; CR, LF, comma and quote only inside a quoted field."""
    records, record, field, i, text = [], [], "", 0, data.decode("utf-8")
    while i < len(text):
        if text[i] == '"':
            end = i + 1
            while True:
                end = text.index('"', end)
                if text[end + 1:end + 2] != '"':
                    break
                end += 2
            field, i = text[i + 1:end].replace('""', '"'), end + 1
        else:
            j = min((k for k in (text.find(c, i) for c in ',\r') if k >= 0), default=len(text))
            field, i = text[i:j], j
            assert '\n' not in field and '"' not in field, f"bare LF or quote in an unquoted field: {field!r}"
        record.append(field)
        if text.startswith(",", i):
            i += 1
        elif text.startswith("\r\n", i):
            records.append(record)
            record, i = [], i + 2
        else:
            raise AssertionError(f"expected , or CRLF at {i}: {text[i:i + 20]!r}")
    assert not record, "last record not terminated by CRLF"
    return records


def test_grades_csv_has_one_row_per_student_and_no_formula_cells(tmp_path):
    write_class(tmp_path)
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 1 + len(HOSTILE_IDS)
    assert strict_rfc4180_records((tmp_path / "grades.csv").read_bytes()) == rows
    assert all(len(row) == 3 + len(SUITE.checks) for row in rows)
    for row in rows[1:]:
        assert not row[0].startswith(("=", "+", "-", "@", "\t", "\r")), row[0]
        assert all(float(cell) >= 0 for cell in row[1:])  # numbers stay numbers
    students = {row[0] for row in rows[1:]}
    assert {"'=HYPERLINK(\"http://x\",\"y\")", "'+1", "'-1", "'@SUM(A1)", "a\rb", "王芳", "ok0"} <= students


def test_feedback_file_names_stay_inside_their_folders_and_are_distinct(tmp_path):
    out = tmp_path / "out"
    write_class(out)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(p.is_relative_to(out) for p in written), written
    files = {p.relative_to(out).as_posix() for p in written}
    per_student = {f for f in files if f.startswith(("feedback/", "results/"))}
    assert files - per_student == {"grades.csv", "run.json", "report.html"}
    assert all(f.count("/") == 1 for f in per_student)
    assert len(per_student) == 3 * len(HOSTILE_IDS)  # md, html, json each: no two ids share a file
    assert {"feedback/王芳.md", "feedback/ok0.html", "results/-1.json", "feedback/@SUM(A1).md"} <= files
    assert all(len(f.encode()) < 240 for f in per_student)


def test_file_stem_is_stable_and_never_collides_with_a_readable_id():
    stem = file_stem("../../y")
    assert "/" not in stem and stem == file_stem("../../y") and stem != file_stem("../../z")
    assert file_stem(stem) != stem  # an id that imitates a hashed stem is hashed too
    assert file_stem("王芳") == "王芳" and file_stem("no_scale") == "no_scale"


def markdown_tokens(text: str) -> list:
    flat = []
    for token in MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text):
        flat += [token, *(token.children or [])]
    return flat


def test_markdown_feedback_has_no_headings_links_images_html_or_tables_from_student_text(tmp_path):
    results = write_class(tmp_path)
    allowed_headings = {"需要改进的地方 / What to fix", "你的程序输出（节选）/ What your code printed (excerpt)",
                        *(f"`{c.function}`" for c in SUITE.checks)}
    for r in results:
        md = (tmp_path / "feedback" / f"{file_stem(r.student)}.md").read_text()
        tokens = markdown_tokens(md)
        count = lambda kind: sum(t.type == kind for t in tokens)  # noqa: E731
        assert not {t.type for t in tokens} & {"link_open", "image", "html_block", "ordered_list_open"}
        assert {t.content for t in tokens if t.type == "html_inline"} == {"<br>"}  # the template's own, in the table
        assert count("blockquote_open") == (0 if r.graded else 1)  # only the template's "could not be graded"
        assert count("list_item_open") == (3 * (len(SUITE.checks) - 1) if r.graded else 0)
        assert count("table_open") == 1
        assert count("tr_open") == 1 + len(SUITE.checks)
        headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
        assert headings[0].startswith(f"{SUITE.assignment} —") and set(headings[1:]) <= allowed_headings, headings
        assert {t.content for t in tokens if t.type == "code_inline"} <= {c.function for c in SUITE.checks}
        html = MarkdownIt("commonmark").render(md)
        assert "## Score: 20 / 20" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as written
        assert "[click](http://evil)" in html and "![img](x)" in html
        page = (tmp_path / "feedback" / f"{file_stem(r.student)}.html").read_text()
        assert "<script>" not in page and "&lt;script&gt;" in page


class _Page(HTMLParser):
    """What a browser would see of a page: its scripts' texts, the CSP meta, elements carrying event handlers."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.scripts, self.csp, self.handlers, self.elements, self._in_script = [], [], [], [], False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        if tag == "script":
            self.scripts.append("")
            self._in_script = True
        if tag == "meta" and (attrs.get("http-equiv") or "").lower() == "content-security-policy":
            self.csp.append(attrs.get("content") or "")
        self.handlers += [(tag, k) for k in attrs if k.startswith("on")]

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def only_our_script(text: str) -> None:
    """The page runs nothing but the report's own sort script: one <script>, exactly SORT_SCRIPT's text, whose
    SHA-256 is the only source the page's Content-Security-Policy allows; no inline event handler anywhere (no
    hash allows those); no other script source, no 'unsafe-inline' for scripts."""
    page = _Page(text)
    assert text.count("<script") == 1 and len(page.scripts) == 1, "a <script> that is not ours"
    assert page.scripts[0] == SORT_SCRIPT
    assert page.handlers == []
    assert len(page.csp) == 1
    assert text.index("Content-Security-Policy") < text.index("<body>")  # in force before any student text
    policy = dict(part.strip().split(" ", 1) for part in page.csp[0].split(";"))
    assert policy["default-src"] == "'none'" and policy["img-src"] == "data:"
    digest = base64.b64encode(hashlib.sha256(page.scripts[0].encode("utf-8")).digest()).decode()
    assert policy["script-src"] == f"'sha256-{digest}'"


def test_the_reports_csp_hash_is_the_hash_of_its_script(tmp_path):
    """Computed here from the page's bytes, as a browser does: the one script runs, and only it."""
    write_class(tmp_path)
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    only_our_script(text)
    script = re.search(r"<script>(.*?)</script>", text, re.S)[1]
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', text)[1]
    assert f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'" in csp
    assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]


def test_the_report_escapes_hostile_ids_and_roster_names_and_runs_only_its_script(tmp_path):
    people = {s: {"name": f"<script>alert({i})</script><img src=x onerror=alert({i})>", "section": "<b>A</b>"}
              for i, s in enumerate(HOSTILE_IDS)}
    results = [result(s, graded=i % 2 == 0) for i, s in enumerate(HOSTILE_IDS)]
    results.append(result("<script>alert('id')</script>"))
    similarity = {"pairs": [{"a": HOSTILE_IDS[0], "b": HOSTILE_IDS[1], "score": 0.99,
                             "code_a": "</pre><script>alert(2)</script>", "code_b": "<img src=x onerror=alert(3)>"}],
                  "median": 0.2, "compared": 20}
    write_outputs(tmp_path, SUITE, results, {"graded": 1, "skipped": 0, "seconds": 1.0, "similarity": similarity,
                                              "roster": {"students": people}})
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    only_our_script(text)
    assert "<img" not in text.replace('<img alt="score histogram"', "") and "<b>A</b>" not in text
    assert "&lt;script&gt;alert(0)&lt;/script&gt;&lt;img src=x onerror=alert(0)&gt;" in text  # shown as written
    assert "&lt;script&gt;alert(&#39;id&#39;)&lt;/script&gt;" in text
    assert "&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in text
    for page in (tmp_path / "feedback").glob("*.html"):  # feedback pages: no script at all
        assert "<script" not in page.read_text(encoding="utf-8"), page.name


def test_the_students_table_reads_without_javascript_and_sorts_numbers_as_numbers(tmp_path):
    """Server-side order by id; each sortable head says its type; numeric cells carry the number to sort by."""
    results = [result(s) for s in ("s10", "s2", "s1")]
    results[0].score, results[1].score, results[2].score = 9.5, 10.0, 2.0
    results[1].late = {"raw_score": 12.0, "penalty": 2.0, "note": "30.0 h late: -20 %",
                       "submitted_at": "2026-11-22T05:59:00+08:00", "due": "2026-11-20T23:59:00+08:00"}
    write_outputs(tmp_path, SUITE, results, {"graded": 3, "skipped": 0, "seconds": 1.0,
                                              "roster": {"students": {"s1": {"name": "王芳", "section": "B"}}}})
    page = _Page((tmp_path / "report.html").read_text(encoding="utf-8"))
    heads = [a for tag, a in page.elements if tag == "th"][:7]
    assert [h.get("data-type") for h in heads] == ["text", "text", "text", "number", "number", "text", None]
    assert heads[0].get("aria-sort") == "ascending"
    scores = [a["data-sort"] for tag, a in page.elements
              if tag == "td" and a.get("class") == "num" and "data-sort" in a]
    assert scores == ["2.0", "9.5", "10.0"]  # rows in id order: s1, s10, s2
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert text.index(">s1<") < text.index(">s10<") < text.index(">s2<")
    assert "迟交 / late −2" in text and "2026-11-22 05:59 +08:00" in text and "王芳" in text
    assert "不在名单 / not on the roster" in text  # s2 and s10 are not on the roster given


def test_print_summary_shows_ids_and_messages_without_escapes_or_markup(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "2000")
    monkeypatch.delenv("FORCE_COLOR", raising=False)  # not a terminal: any ESC in the output came from a student
    results = [result(s, graded=i % 2 == 0) for i, s in enumerate(HOSTILE_IDS)]
    print_summary(SUITE, results, {"graded": 1, "skipped": 0, "seconds": 1.0}, {"grades": tmp_path / "[b]x.csv"})
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\r" not in out
    assert "\\x1b[31mred" in out and "\\u202eevil" in out and "a\\x0db" in out
    assert "[bold red]x[/]" in out and "[click](http://evil)" in out and "[b]x.csv" in out
    assert "王芳" in out


def _student_file(folder, name="attention.py"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("# work\n")


def test_student_folder_named_submitted_is_graded_as_a_student(tmp_path):
    _student_file(tmp_path / "alice")
    _student_file(tmp_path / "submitted" / "attention")
    (tmp_path / "bob.py").write_text("# work\n")
    assert [e.student for e in find_submissions(tmp_path, NAMES, tmp_path / "w")] == ["alice", "bob", "submitted"]


@pytest.mark.parametrize("marker", ["nbgrader_config.py", "gradebook.db"])
def test_nbgrader_course_root_still_uses_the_submitted_layout(tmp_path, marker):
    _student_file(tmp_path / "submitted" / "erin" / "attention")
    _student_file(tmp_path / "submitted" / "frank" / "attention", "attention.ipynb")
    (tmp_path / marker).write_text("")
    assert [e.student for e in find_submissions(tmp_path, NAMES, tmp_path / "w")] == ["erin", "frank"]


def test_layout_option_forces_or_disables_the_nbgrader_layout(tmp_path):
    _student_file(tmp_path / "submitted" / "erin" / "attention")
    assert [e.student for e in find_submissions(tmp_path, NAMES, tmp_path / "w", layout="nbgrader")] == ["erin"]
    (tmp_path / "nbgrader_config.py").write_text("")
    folders = find_submissions(tmp_path, NAMES, tmp_path / "w", layout="folders")
    assert "submitted" in [e.student for e in folders]
    with pytest.raises(IntakeError):
        find_submissions(tmp_path / "submitted" / "erin", NAMES, tmp_path / "w", layout="nbgrader")
    with pytest.raises(IntakeError):
        find_submissions(tmp_path, NAMES, tmp_path / "w", layout="moodle")


def test_cli_grade_accepts_only_known_layouts(tmp_path):
    bad = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path), "--layout", "moodle"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and "auto, folders or nbgrader" in bad.stderr
