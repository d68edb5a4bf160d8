"""A notebook's JSON, made text: what the grader and the learner's self-check both read before a kernel runs it.

JSON may escape half of a UTF-16 pair (``\\ud800``) where no partner follows: valid JSON, but a character no UTF-8
file or kernel message can carry, so writing or sending the notebook raised (a grader error, and 0, on every run).
"""

from __future__ import annotations

import json
import re
from typing import Any

_HALF_PAIR = re.compile("[\ud800-\udfff]")


def text_only(data: Any) -> tuple[Any, int]:
    """Loaded JSON with every half pair in its strings made U+FFFD, and how many there were."""
    dumped = json.dumps(data, ensure_ascii=False)
    fixed, halves = _HALF_PAIR.subn("\ufffd", dumped)
    return (json.loads(fixed) if halves else data), halves


def half_pairs(n: int) -> str:
    """What ``text_only`` replaced, in words."""
    what = "1 half of a UTF-16 pair" if n == 1 else f"{n} halves of UTF-16 pairs"
    return f"{what} (escapes such as \\ud800, which no text file can hold)"


def loads_text(text: str) -> tuple[Any, int]:
    """``json.loads`` and ``text_only``: the second only where the text holds an escape."""
    data = json.loads(text)
    return text_only(data) if "\\u" in text else (data, 0)
