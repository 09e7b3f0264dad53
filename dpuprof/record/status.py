"""The live status line on stderr: elapsed time, samples, top categories so far."""

from __future__ import annotations

import sys
import time


class StatusLine:
    """Rewrites one line on a TTY; on a pipe or file prints a line every ``every_s`` seconds."""

    def __init__(self, quiet: bool = False, stream=None, every_s: float = 10.0):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self._last = 0.0
        self._shown = False

    def update(self, elapsed_s: float, samples: int, categories, lost: int) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if not self.tty and now - self._last < self.every_s:
            return
        self._last = now
        busy = sum(categories.values()) or 1
        top = ", ".join(f"{c} {100 * n / busy:.0f}%" for c, n in categories.most_common(3))
        line = f"[dpuprof] {elapsed_s:6.1f}s  {samples} samples  {top or 'collecting...'}"
        if lost:
            line += f"  lost {lost}"
        if self.tty:
            self.stream.write("\r\x1b[K" + line)
            self._shown = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def clear(self) -> None:
        if self.tty and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False
