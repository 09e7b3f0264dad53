"""Flame graphs as inline SVG: the infrastructure tax, and a differential one for two runs.

Frames are drawn root at the bottom, children heaviest first. Every frame name is escaped; the
zoom script (``reports/templates/report.js``) reads names with ``textContent`` only. Frames narrower
than ``MIN_PX`` are dropped so a deep profile stays a small file.
"""

from __future__ import annotations

import hashlib
from html import escape

import pandas as pd

from dpuprof.categories import INFRASTRUCTURE
from dpuprof.recording.folded import split as split_frames
from dpuprof.render.palette import color

WIDTH = 1200
FRAME_H = 17
PAD_TOP = 28
MIN_PX = 1.0
MAX_FRAMES = 6000
CHAR_PX = 6.6


class Node:
    __slots__ = ("name", "value", "other", "children", "cats")

    def __init__(self, name: str):
        self.name = name
        self.value = 0.0   # samples (B in a differential graph)
        self.other = 0.0   # samples of A, scaled to B's total (differential only)
        self.children: dict[str, Node] = {}
        self.cats: dict[str, float] = {}

    def child(self, name: str) -> "Node":
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = Node(name)
        return node

    @property
    def category(self) -> str:
        return max(self.cats, key=self.cats.get) if self.cats else ""


def build_tree(stacks: pd.DataFrame, categories=None, root: str = "all") -> Node:
    """A frame tree from rows of (folded, category, samples); only ``categories`` if given."""
    top = Node(root)
    if categories is not None:
        stacks = stacks[stacks["category"].isin(categories)]
    for folded, cat, samples in zip(stacks["folded"], stacks["category"], stacks["samples"]):
        samples = float(samples)
        node = top
        node.value += samples
        node.cats[cat] = node.cats.get(cat, 0.0) + samples
        for frame in split_frames(str(folded)):  # Node.child inlined: this loop is per frame of every stack
            kids = node.children
            node = kids.get(frame)
            if node is None:
                node = kids[frame] = Node(frame)
            node.value += samples
            cats = node.cats
            cats[cat] = cats.get(cat, 0.0) + samples
    return top


def add_other(tree: Node, stacks: pd.DataFrame, categories=None) -> Node:
    """Overlay run A's samples on run B's ``tree`` (for a differential graph), scaled so both
    runs have the same total; frames only in A are not drawn (their loss shows in the parent)."""
    if categories is not None:
        stacks = stacks[stacks["category"].isin(categories)]
    total_a = float(stacks["samples"].sum())
    scale = tree.value / total_a if total_a else 0.0
    for folded, samples in zip(stacks["folded"], stacks["samples"]):
        v = float(samples) * scale
        node = tree
        node.other += v
        for frame in split_frames(str(folded)):
            node = node.children.get(frame)
            if node is None:
                break
            node.other += v
    return tree


def _shade(base: str, name: str) -> str:
    """``base`` lightened by a stable per-name amount, so neighbouring frames differ."""
    k = 0.12 + 0.33 * (int(hashlib.md5(name.encode("utf-8", "replace")).hexdigest()[:4], 16) / 0xFFFF)
    r, g, b = (int(base[i:i + 2], 16) for i in (1, 3, 5))
    return "#%02x%02x%02x" % tuple(int(c + (255 - c) * k) for c in (r, g, b))


def _diff_color(b: float, a: float) -> str:
    """White for no change, red where B has more samples than A, blue where it has fewer."""
    top = max(a, b)
    if top <= 0:
        return "#ffffff"
    d = (b - a) / top  # -1 .. 1
    k = int(255 - 200 * min(abs(d), 1.0))
    return f"#ff{k:02x}{k:02x}" if d > 0 else f"#{k:02x}{k:02x}ff"


def _label(name: str, width_px: float) -> str:
    fit = int((width_px - 6) / CHAR_PX)
    if fit < 3:
        return ""
    return name if len(name) <= fit else name[: fit - 2] + ".."


def flame_svg(tree: Node, title: str, *, diff: bool = False, unit: str = "samples",
              svg_id: str = "flame") -> str:
    """The SVG text of ``tree``; ``diff`` colours frames by B versus A (``Node.other``)."""
    total = tree.value
    frames: list[tuple[int, float, float, Node]] = []  # depth, x (0..1), w (0..1), node
    if total > 0:
        stack = [(tree, 0, 0.0)]
        while stack and len(frames) < MAX_FRAMES:
            node, depth, x = stack.pop()
            w = node.value / total
            frames.append((depth, x, w, node))
            cx = x
            kids = sorted(node.children.values(), key=lambda n: (-n.value, n.name))
            pending = []
            for kid in kids:
                if kid.value / total * WIDTH >= MIN_PX:
                    pending.append((kid, depth + 1, cx))
                cx += kid.value / total
            stack.extend(reversed(pending))
    depth_max = max((f[0] for f in frames), default=0)
    height = PAD_TOP + (depth_max + 1) * FRAME_H + 6
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="flame" id="{escape(svg_id)}" '
           f'viewBox="0 0 {WIDTH} {height}" width="100%" role="img" aria-label="{escape(title)}" '
           f'data-width="{WIDTH}">',
           f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#fbfbfb"/>',
           f'<text x="6" y="17" class="ftitle">{escape(title)}</text>',
           f'<text x="{WIDTH - 6}" y="17" text-anchor="end" class="fhint">click a frame to zoom, '
           f'click the root to reset</text>']
    if not frames:
        out.append(f'<text x="{WIDTH / 2}" y="{PAD_TOP + 12}" text-anchor="middle">no samples</text></svg>')
        return "\n".join(out)
    for depth, x, w, node in frames:
        y = height - 6 - (depth + 1) * FRAME_H
        px, pw = x * WIDTH, w * WIDTH
        pct = 100 * node.value / total
        if diff:
            fill = _diff_color(node.value, node.other)
            change = 100 * (node.value - node.other) / total
            tip = (f"{node.name}\nB: {node.value:,.0f} {unit} ({pct:.2f} %)\n"
                   f"A (scaled): {node.other:,.0f} ({100 * node.other / total:.2f} %)\nchange {change:+.2f} pp")
        else:
            fill = _shade(color(node.category), node.name) if depth else "#cfcfcf"
            tip = f"{node.name}\n{node.value:,.0f} {unit} ({pct:.2f} %)" + \
                (f"\n{node.category}" if node.category else "")
        out.append(f'<g class="fg" data-x="{x:.6f}" data-w="{w:.6f}" data-d="{depth}">'
                   f'<title>{escape(tip)}</title>'
                   f'<rect x="{px:.2f}" y="{y}" width="{max(pw - 0.5, 0.1):.2f}" height="{FRAME_H - 1}" '
                   f'fill="{fill}" rx="1.5"/>'
                   f'<text x="{px + 3:.2f}" y="{y + FRAME_H - 5}">{escape(_label(node.name, pw))}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


def tax_svg(stacks: pd.DataFrame, title: str = "Infrastructure tax", svg_id: str = "flame-tax") -> str:
    return flame_svg(build_tree(stacks, INFRASTRUCTURE, root="infrastructure"), title, svg_id=svg_id)


def diff_svg(a: pd.DataFrame, b: pd.DataFrame, title: str, categories=None, svg_id: str = "flame-diff") -> str:
    tree = add_other(build_tree(b, categories), a, categories)
    return flame_svg(tree, title, diff=True, svg_id=svg_id)
