"""Render the student README from the handout template (Jinja2, StrictUndefined)."""
from __future__ import annotations

import jinja2

from .errors import ReleaseError
from .spec import Spec


def render(spec: Spec) -> str | None:
    """README text, or None when the assignment has no handout. Context: every key of assignment.toml."""
    path = spec.folder / spec.handout
    if not path.is_file():
        return None
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    try:
        return env.from_string(path.read_text(encoding="utf-8")).render(**spec.data)
    except jinja2.TemplateSyntaxError as exc:
        raise ReleaseError(f"template error: {exc.message}", spec.rel(path), exc.lineno) from None
    except jinja2.UndefinedError as exc:
        raise ReleaseError(f"template error: {exc.message} (context: assignment.toml keys)", spec.rel(path)) from None
