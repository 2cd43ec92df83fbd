"""The Jinja2 environment and number formatting shared by every written output."""
from jinja2 import Environment, PackageLoader, StrictUndefined

ENV = Environment(loader=PackageLoader("autograder.report", "templates"), undefined=StrictUndefined,
                  trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def num(x: float) -> str:
    """1.0 -> '1', 0.5 -> '0.5'."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
