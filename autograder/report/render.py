"""The Jinja2 environment and number formatting shared by every written output."""
import re

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

# HTML templates escape everything they insert: student ids, exception messages and printed output are
# written by students, and the reports are opened in the course staff's browsers.
ENV = Environment(loader=PackageLoader("autograder.report", "templates"), undefined=StrictUndefined,
                  autoescape=select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
                  trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def code_fence(text: str) -> str:
    """A Markdown fence longer than any run of backticks in `text`, so printed text cannot close it early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def num(x: float) -> str:
    """1.0 -> '1', 0.5 -> '0.5'."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
