"""公开检查 / public checks — 只需要 torch / needs only torch:

    python check.py                 # 检查你改过的文件 / checks the file you changed (attention.py or attention.ipynb)
    python check.py attention.ipynb  --lang en
    python check.py -f causal_mask      # 只检查一个函数 / one function only

只包含公开检查；评分时另有隐藏检查。 / Public checks only; grading adds hidden checks.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checker.cli import main  # noqa: E402

sys.exit(main())
