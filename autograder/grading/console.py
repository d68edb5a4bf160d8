"""What a grading run prints as it goes: a bar with counts and ETA on a terminal, plain lines elsewhere
(CI logs). (The student's own progress through a chapter is course/progress.py.)"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, bar: bool | None = None):
        self.stream = stream or sys.stdout
        self.bar = self.stream.isatty() if bar is None else bar
        self.started = time.monotonic()

    def note(self, text: str) -> None:
        self._clear()
        print(text, file=self.stream, flush=True)

    def update(self, done: int, total: int, text: str) -> None:
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
