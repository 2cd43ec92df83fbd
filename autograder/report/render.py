"""The Jinja2 environment, number formatting, and the one place where text from students (ids from folder and
file names, exception messages) is made inert for each output: CSV cells, the terminal, Markdown, file names."""
import hashlib
import re

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from rich.markup import escape as rich_escape

from .feedback import num  # noqa: F401  (the templates' number format)

# HTML templates escape everything they insert: student ids, exception messages and printed output are
# written by students, and the reports are opened in the course staff's browsers.
ENV = Environment(loader=PackageLoader("autograder.report", "templates"), undefined=StrictUndefined,
                  autoescape=select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
                  trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def csv_cell(text: str) -> str:
    """A text cell that spreadsheets show as text: a leading = + - @ tab CR or LF gets a ' in front (OWASP's rule
    against CSV injection). Numbers are written as they are, not through this."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r", "\n") else text


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible_controls(text: str) -> str:
    """Control characters (C0, DEL, C1) and bidi overrides/isolates as visible escapes: ESC -> \\x1b."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def terminal_text(text: str) -> str:
    """Student text for rich output that parses markup (tables, progress descriptions): controls made visible,
    markup escaped, so `[bold]` and ANSI escapes print as the characters they are."""
    return rich_escape(visible_controls(text))


_MD_PUNCTUATION = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])""")


def md_text(text: str) -> str:
    """Student text inline in Markdown: every ASCII punctuation character backslash-escaped (CommonMark allows it
    for all of them) and line breaks collapsed to spaces, so it cannot make headings, links, images, HTML, tables,
    lists, emphasis or code; it renders as exactly the characters written."""
    return _MD_PUNCTUATION.sub(r"\\\1", re.sub(r"[\r\n]+", " ", str(text)))


_UNSAFE_IN_NAME = re.compile(r"[/\\\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")  # + undecodable bytes
_HASHED = re.compile(r"~[0-9a-f]{12}$")
MAX_STEM_BYTES = 200


def file_stem(student: str) -> str:
    """A student's file name stem (feedback/<stem>.md, results/<stem>.json): the id itself when it is a plain name,
    else its sanitised form plus a hash of the id (stable, and distinct from every other id's stem): for "", ".",
    "..", a leading ".", / \\ NUL or other control characters, over 200 bytes, or what looks like a hashed stem."""
    if (student not in ("", ".", "..") and not _UNSAFE_IN_NAME.search(student) and not _HASHED.search(student)
            and not student.startswith(".") and len(student.encode("utf-8", "surrogatepass")) <= MAX_STEM_BYTES):
        return student
    clean = _UNSAFE_IN_NAME.sub("_", student).lstrip(".").encode("utf-8")[:100].decode("utf-8", "ignore")
    return f"{clean or '_'}~{hashlib.sha256(student.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


ENV.filters["md"] = md_text
ENV.globals["file_stem"] = file_stem


def code_fence(text: str) -> str:
    """A Markdown fence longer than any run of backticks in `text`, so printed text cannot close it early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)

