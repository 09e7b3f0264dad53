"""dpuprof.recording.folded: the folded stack text (frames joined with ';', root first) and the
folded file format (``stack COUNT`` lines), as record writes them and render reads them."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpuprof.recording import folded


def test_escape_keeps_a_name_one_frame_on_one_line():
    assert folded.escape("a;b\nc\rd") == "a:b c d"
    assert folded.split(folded.join([folded.escape("x;y"), "z"])) == ["x:y", "z"]


def test_split_join_leaf_under():
    assert folded.split("") == []
    assert folded.split("root;mid;leaf") == ["root", "mid", "leaf"]
    assert folded.join(["root", "mid", "leaf"]) == "root;mid;leaf"
    assert folded.leaf("root;mid;leaf") == "leaf" and folded.leaf("only") == "only" and folded.leaf("") == ""
    assert folded.under("A: run;1", "x;y") == "A: run:1;x;y"
    series = folded.under("node", pd.Series(["a;b", "c"]))
    assert list(series) == ["node;a;b", "node;c"]


def test_lines_sorted_rounded_zero_dropped_and_parsed_back():
    text = "\n".join(folded.lines([("b;c", 2.4), ("a", 3), ("z", 0), ("a;x\ny", 1)], prefix="p;"))
    assert text.splitlines() == ["p;a 3", "p;a;x y 1", "p;b;c 2"]
    assert folded.parse(text + "\n\np;a 4\n") == {"p;a": 7, "p;a;x y": 1, "p;b;c": 2}


@pytest.mark.parametrize("bad", ["a;b;c", "a;b x", " 5", "a -1"])
def test_parse_names_the_bad_line(bad):
    with pytest.raises(ValueError, match="line 2"):
        folded.parse("ok 1\n" + bad)


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6))
def test_escaped_frames_round_trip(names):
    frames = [folded.escape(n) for n in names]
    stack = folded.join(frames)
    assert folded.split(stack) == frames
    assert folded.leaf(stack) == frames[-1]
