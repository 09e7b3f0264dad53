"""The folded stack text: one stack as frame names joined with ';', root first (the flamegraph.pl
convention the ``stacks`` table stores, see schema.py), and the folded *file* format: one line per
stack, ``frame;frame;frame COUNT``.

The Recording seam owns this text: ``record`` writes it (``escape``, ``join``), the reader rebuilds
it from frame ids, and ``project`` and ``render`` read it (``split``, ``leaf``, ``parse``).

- ``escape(name)``: a frame name made safe inside a stack (';' separates frames and becomes ':',
  a line break separates stacks in a file and becomes ' ');
- ``join(frames)`` / ``split(stack)``: frames (root first) <-> stack text; ``split("") == []``;
- ``leaf(stack)``: the leaf-most frame;
- ``under(root, stack)``: the stack with ``root`` put above it (a process, node or run name);
  ``stack`` may be a str or a pandas Series of them;
- ``lines(counts)`` / ``parse(text)``: the folded file format, written and read back.
"""

from __future__ import annotations

from collections.abc import Iterable

SEP = ";"


def escape(name: str) -> str:
    """``name`` usable as one frame: no ';' (frame separator), no '\\n' or '\\r' (line separator)."""
    return name.replace(SEP, ":").replace("\n", " ").replace("\r", " ")


def join(frames: Iterable[str]) -> str:
    """Frames, root first (each already ``escape``d) -> stack text."""
    return SEP.join(frames)


def split(stack: str) -> list[str]:
    """Stack text -> its frames, root first; the empty stack has none."""
    return stack.split(SEP) if stack else []


def leaf(stack: str) -> str:
    """The leaf-most (last) frame of a stack; "" for the empty stack."""
    return stack.rsplit(SEP, 1)[-1]


def under(root: str, stack):
    """``root;stack``: ``root`` (escaped here) as a new root frame of ``stack`` (str or Series)."""
    return escape(root) + SEP + stack


def lines(counts: Iterable[tuple[str, float]], prefix: str = "") -> list[str]:
    """Folded file lines ``PREFIXstack COUNT``, sorted by stack, for each (stack, count) with a
    count above 0 (counts are samples, rounded to whole ones). ``prefix`` is put
    before every stack as it is (e.g. ``"A: run;"``). A line break inside a stack would start a new
    line of the file, so any is replaced by a space."""
    out = []
    for stack, n in sorted(counts):
        if n > 0:
            out.append(f"{prefix}{' '.join(str(stack).splitlines())} {int(round(n))}")
    return out


def parse(text: str) -> dict[str, int]:
    """Parse folded file text (what flamegraph.pl reads) -> {stack: count}; repeated stacks add up,
    blank lines are skipped. ValueError naming the first line that is not ``stack COUNT``."""
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        stack, sep, count = line.rpartition(" ")
        if not sep or not stack or not count.isdigit():
            raise ValueError(f"line {n}: not 'frame;frame count': {line[:80]!r}")
        out[stack] = out.get(stack, 0) + int(count)
    return out
