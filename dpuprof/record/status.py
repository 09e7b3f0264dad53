"""The live status line on stderr: elapsed time, then what this mode collects so far.

eBPF mode: stack samples and the top categories. psutil mode (``--probes psutil``) takes no
samples, so it shows what it does collect: the workload's CPU seconds and its processes.

On a TTY the line is a rich ``Live`` display, redrawn in place on each update (no refresh thread)
and erased by ``clear``; on a pipe or file it is a plain line every ``every_s`` seconds.
"""

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
        self._live = None

    def update(self, elapsed_s: float, samples: int, categories, lost: int, *,
               workload_cpu_s: float | None = None, processes: int | None = None) -> None:
        """Show progress. ``categories``: a Counter of busy samples per category (eBPF mode).
        ``workload_cpu_s`` (CPU seconds of the workload so far) and ``processes`` (workload
        processes seen so far), when given, are shown in place of the samples (psutil mode)."""
        if self.quiet:
            return
        now = time.monotonic()
        if not self.tty and now - self._last < self.every_s:
            return
        self._last = now
        self._write(self.line(elapsed_s, samples, categories, lost, workload_cpu_s, processes))

    @staticmethod
    def line(elapsed_s, samples, categories, lost, workload_cpu_s=None, processes=None) -> str:
        """The status text (no terminal control characters)."""
        if workload_cpu_s is not None:
            n = processes or 0
            line = (f"[dpuprof] {elapsed_s:6.1f}s  workload {workload_cpu_s:.2f} CPU-s in {n} "
                    f"process{'' if n == 1 else 'es'}  (psutil mode: no category split)")
        else:
            busy = sum(categories.values()) or 1
            top = ", ".join(f"{c} {100 * n / busy:.0f}%" for c, n in categories.most_common(3))
            line = f"[dpuprof] {elapsed_s:6.1f}s  {samples} samples  {top or 'collecting...'}"
        if lost:
            line += f"  lost {lost}"
        return line

    def _write(self, line: str) -> None:
        if not self.tty:
            self.stream.write(line + "\n")
            self.stream.flush()
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
        self._live.update(Text(line, no_wrap=True, overflow="ellipsis"), refresh=True)

    def clear(self) -> None:
        """Erase the line (TTY); nothing to do on a pipe."""
        if self._live is not None:
            self._live.stop()
            self._live = None
