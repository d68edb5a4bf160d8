"""What a grading run prints as it goes: a bar with counts and ETA on a terminal, plain lines elsewhere
(CI logs). (The student's own progress through a chapter is course/progress.py.)

Student ids, file names and the grader's notes about them are the students' text: printed raw, an escape
sequence in a file name could erase the line above, write a fake one or hide the rest of the output.
``printable`` is the one door to the console for such text; ``Progress`` passes everything through it.
"""

from __future__ import annotations

import re
import sys
import time
from typing import TextIO

# Control characters (C0, DEL, C1), line and paragraph separators, marks that reorder or hide text (bidi
# controls, zero-width characters) and lone surrogates (a file name that is not UTF-8).
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
                     r"\ufeff\ufff9-\ufffb\ud800-\udfff]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    if m.group() in _SHORT:
        return _SHORT[m.group()]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every character that could move the cursor, change the terminal or hide text written
    as an escape (``\\x1b``, ``\\r``, ``\\u202e``); letters of every script are kept."""
    return _UNSAFE.sub(_escape, str(text))


class Progress:
    def __init__(self, stream: TextIO | None = None, bar: bool | None = None):
        self.stream = stream or sys.stdout
        self.bar = self.stream.isatty() if bar is None else bar
        self.started = time.monotonic()

    def note(self, text: str) -> None:
        self._clear()
        print("\n".join(printable(line) for line in text.split("\n")), file=self.stream, flush=True)

    def update(self, done: int, total: int, text: str) -> None:
        text = printable(text)
        elapsed = time.monotonic() - self.started
        eta = elapsed / done * (total - done) if done else 0.0
        if not self.bar:
            print(f"[{done}/{total}] {text} (about {eta:.0f} s left)", file=self.stream, flush=True)
            return
        width = 30
        filled = int(width * done / total) if total else width
        line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}  ETA {eta:4.0f} s  {text}"
        self.stream.write("\r\033[K" + line[:150])
        if done == total:
            self.stream.write("\n")
        self.stream.flush()

    def _clear(self) -> None:
        if self.bar:
            self.stream.write("\r\033[K")
