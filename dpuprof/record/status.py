"""The live status line on stderr: elapsed time, then what this mode collects so far.

eBPF mode: stack samples and the top categories. psutil mode (``--probes psutil``) takes no
samples, so it shows what it does collect: the workload's CPU seconds and its processes.

On a TTY the line is a dpuprof.liveline.LiveLine (rich ``Live``), redrawn in place on each update
and erased by ``clear``; on a pipe or file it is a plain line every ``every_s`` seconds.
"""

from __future__ import annotations

import sys
import time

from dpuprof.liveline import LiveLine


class StatusLine:
    """Rewrites one line on a TTY; on a pipe or file prints a line every ``every_s`` seconds."""

    def __init__(self, quiet: bool = False, stream=None, every_s: float = 10.0):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self._last = 0.0
        self._line = LiveLine(self.stream)

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
        self._line.show(line)

    def clear(self) -> None:
        """Erase the line (TTY); nothing to do on a pipe."""
        self._line.clear()
