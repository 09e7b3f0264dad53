"""A one-line progress indicator on stderr for long renders.

Shown only when stderr is a terminal and ``-q`` was not given: a rich ``Live`` line redrawn in
place on each step (no refresh thread) and erased when done, so the output stays clean when piped
or captured.
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
        self._live = None

    def step(self, message: str) -> None:
        """Show ``message`` with the time since the start (after the first ``delay_s``)."""
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        if elapsed < self.delay_s and self._live is None:
            return
        from rich.text import Text

        if self._live is None:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.stream, force_terminal=True, markup=False, highlight=False, emoji=False)
            self._live = Live(console=console, auto_refresh=False, transient=True,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start()
            # Live hides the cursor until stop(); a recorder killed with -9 never stops it, so
            # keep the cursor shown (the line is redrawn in place either way).
            console.show_cursor(True)
        line = f"dpuprof report: {message} [{elapsed:.1f} s]"
        self._live.update(Text(line[:200], no_wrap=True, overflow="ellipsis"), refresh=True)

    def done(self) -> None:
        """Erase the line, if one was shown."""
        if self._live is not None:
            self._live.stop()
            self._live = None
