"""One line on a terminal, redrawn in place (rich ``Live``, no refresh thread) and erased at the end.

Shared by the recorder's status line (dpuprof/record/status.py) and the report's progress line
(dpuprof/render/progress.py), which belong to different stages and so cannot import each other.
"""

from __future__ import annotations


class LiveLine:
    """``show(text)`` draws or redraws the line on ``stream`` (a terminal); ``clear()`` erases it."""

    def __init__(self, stream):
        self.stream = stream
        self._live = None

    @property
    def shown(self) -> bool:
        return self._live is not None

    def show(self, text: str, limit: int | None = None) -> None:
        from rich.text import Text  # noqa: PLC0415 -- loaded by `dpuprof --help`; rich.live ~21 ms

        if self._live is None:
            from rich.console import Console  # noqa: PLC0415 -- loaded by `dpuprof --help`; rich.live ~21 ms
            from rich.live import Live  # noqa: PLC0415 -- loaded by `dpuprof --help`; rich.live ~21 ms

            console = Console(file=self.stream, force_terminal=True, markup=False, highlight=False, emoji=False)
            self._live = Live(console=console, auto_refresh=False, transient=True,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start()
            # Live hides the cursor until stop(); a recorder killed with -9 never stops it, so
            # keep the cursor shown (the line is redrawn in place either way).
            console.show_cursor(True)
        self._live.update(Text(text if limit is None else text[:limit], no_wrap=True, overflow="ellipsis"),
                          refresh=True)

    def clear(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
