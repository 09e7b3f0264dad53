"""Terminal text through rich: tables laid out by rich, colour only when asked for (a TTY).

``table(header, rows, right=...)`` builds a rich Table of plain cells (never markup: names come
from a recording); ``to_text(parts, color)`` renders strings, rich Text and tables to one string,
with ANSI styles when ``color`` and none otherwise, so piped or captured output stays plain text.
Rich is imported when a terminal text is made, not when the CLI starts.
"""

from __future__ import annotations

import io
import re

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

#: wide enough that no table of the report wraps a cell (numbers are never split over lines)
WIDTH = 240
_CTRL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(text) -> str:
    """``text`` with control characters replaced by '?', so a hostile process name cannot send
    escape sequences to the user's terminal."""
    return _CTRL.sub("?", str(text))


def table(header: list[str], rows: list[list[str]], right=(), max_w: int = 48, indent: int = 2,
          min_widths: dict[int, int] | None = None):
    """A rich Table: ``header`` then ``rows`` of text cells, columns in ``right`` right-aligned,
    cells longer than ``max_w`` cut with '…', a rule under the header, ``indent`` spaces left.
    An empty ``header``: no header row (columns from the first row). ``min_widths``: column ->
    its least width (a bar column keeps its width when every bar is short)."""
    t = Table(box=box.SIMPLE_HEAD, show_header=bool(header), show_edge=False, pad_edge=False, padding=(0, 1),
              collapse_padding=True, header_style="bold")
    right, min_widths = set(right), min_widths or {}
    for i, h in enumerate(header or (rows[0] if rows else [])):
        t.add_column(clean(h) if header else "", justify="right" if i in right else "left", no_wrap=True,
                     overflow="ellipsis", max_width=max_w, min_width=min_widths.get(i))
    for r in rows:
        t.add_row(*(clean(c) for c in r))
    return Padding(t, (0, 0, 0, indent), expand=False)


def styled(text: str, style: str | None = None):
    """``text`` (cleaned, never read as markup) as rich Text with ``style`` ("bold", "dim", "yellow")."""
    return Text(clean(text), style=style or "")


def to_text(parts, color: bool = False, width: int = WIDTH) -> str:
    """Render ``parts`` (str, rich Text or other renderables), one after another, to text; ANSI
    styles only when ``color``. Strings and Text are printed as they are (no markup, no
    highlighting, never wrapped); tables are laid out in ``width`` columns."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=color, color_system="standard" if color else None,
                      markup=False, highlight=False, emoji=False, soft_wrap=False)
    for p in parts:  # lines of text are never wrapped (a pipe or file reader gets them whole)
        console.print(p, soft_wrap=not hasattr(p, "__rich_console__") or hasattr(p, "plain"))
    # rich pads a line to the table's width: trailing blanks carry nothing
    return "\n".join(line.rstrip() for line in out.getvalue().split("\n"))
