"""A one-line progress indicator on stderr for long renders.

Shown only when stderr is a terminal and ``-q`` was not given: a rich ``Live`` line redrawn in
place on each step (no refresh thread) and erased when done, so the output stays clean when piped
or captured.
"""

from __future__ import annotations

import sys
import time

from dpuprof.liveline import LiveLine


class Progress:
    def __init__(self, enabled: bool | None = None, stream=None, delay_s: float = 0.3):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.start = time.monotonic()
        self.delay_s = delay_s  # nothing shown for renders shorter than this
        self._line = LiveLine(self.stream)

    def step(self, message: str) -> None:
        """Show ``message`` with the time since the start (after the first ``delay_s``)."""
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        if elapsed < self.delay_s and not self._line.shown:
            return
        self._line.show(f"dpuprof report: {message} [{elapsed:.1f} s]", limit=200)

    def done(self) -> None:
        """Erase the line, if one was shown."""
        self._line.clear()
