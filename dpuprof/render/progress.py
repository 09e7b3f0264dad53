"""A one-line progress indicator on stderr for long renders.

Shown only when stderr is a terminal and ``-q`` was not given; it rewrites one line in place and
erases it when done, so the output stays clean when piped or captured.
"""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, enabled: bool | None = None, stream=None, delay_s: float = 0.3):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.start = time.monotonic()
        self.delay_s = delay_s  # nothing shown for renders shorter than this
        self._shown = False

    def step(self, message: str) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        if elapsed < self.delay_s and not self._shown:
            return
        line = f"dpuprof report: {message} [{elapsed:.1f} s]"
        self.stream.write("\r\033[K" + line[:200])
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
        self._shown = False
