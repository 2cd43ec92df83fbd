"""Status words and icons of a check result: the word always stands beside the icon (no emoji font, no meaning
lost). Shared by the grader's feedback model and the released checker."""
from __future__ import annotations

from .text import Text

STATUS = {
    "passed": Text(zh="通过", en="passed"),
    "failed": Text(zh="未通过", en="failed"),
    "error": Text(zh="出错", en="error"),
    "not_implemented": Text(zh="还没实现", en="not yet implemented"),
    "timeout": Text(zh="超时", en="timed out"),
    "crashed": Text(zh="崩溃", en="crashed"),
    "forbidden": Text(zh="使用了禁止的 API", en="forbidden API"),
    "not_graded": Text(zh="未运行", en="not run"),
}
ICON = {"passed": "✅", "failed": "❌", "error": "💥", "not_implemented": "📝", "timeout": "⏱️", "crashed": "💥",
        "forbidden": "🚫", "not_graded": "—"}
