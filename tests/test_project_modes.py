"""Issue 35: the speedup's main assumption (the offloads' execution mode) stands beside the headline,
with what the other mode gives, computed by the model; regime wording fits a single-process job;
a sweep whose speedup cannot move says why. Synthetic inputs (test_project_model.make_input)."""

import pytest

from dpuprof.project import build_projection as project
from dpuprof.project import critical_path, modes
from dpuprof.project.sweep import sweep
from dpuprof.render import offload_modes
from dpuprof.render.formats.projection_terminal import render_terminal

from test_project_critical_path import job, rank  # noqa: E402  (same directory)
from test_project_model import PROFILES, make_input  # noqa: E402

BF3 = PROFILES["bluefield-3"]
# zlib in the job's own process: arm_offload (async on the Arm cores, A < 1) takes it
INFLATE = {"compression.user": 2.0, "compute.torch": 5.0, "storage.block": 0.2}


def test_other_mode_is_sync_unless_everything_already_is():
    assert modes.other_override(BF3, None) == ("sync", "--mode sync")
    assert modes.other_override(BF3, "async") == ("sync", "--mode sync")
    assert modes.other_override(BF3, "sync") == (None, "each mechanism's own mode (no --mode)")
    all_sync = BF3.with_overrides(mode="sync")  # a profile whose own modes are all sync
    assert modes.other_override(all_sync, None) == ("async", "--mode async")
    assert modes.other_override(all_sync, "sync") == ("async", "--mode async")


def test_projection_carries_both_modes_from_the_model():
    inp = make_input(INFLATE)
    p = project(inp, BF3)
    sp = p.speedup
    assert sp.modes and "sync" not in sp.modes and "arm_offload" in sp.modes["async"]
    other = sp.other_mode
    sync = project(make_input(INFLATE), BF3, mode="sync").speedup  # the same model run by hand
    assert other.mode == "sync" and other.flag == "--mode sync"
    assert (other.low, other.expected, other.high) == (sync.low, sync.expected, sync.high)
    assert other.modes == sync.modes and other.freed_s == sync.freed_s
    assert sp.expected > other.expected  # arm_offload (A < 1) does not pay when the host waits for it
    # and back: --mode sync compares with each mechanism's own
    back = sync.other_mode
    assert back.mode is None and back.expected == sp.expected


def test_the_agent_can_skip_the_comparison():
    sp = project(make_input(INFLATE), BF3, compare_modes=False).speedup
    assert sp.other_mode is None and sp.modes  # the modes assumed cost nothing: still said


def test_terminal_says_the_mode_beside_the_headline():
    p = project(make_input(INFLATE), BF3)
    text = render_terminal(p)
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("Speedup of the recorded job:"))
    other = p.speedup.other_mode.expected
    assert f"(assumes the host does not wait for the DPU (" in lines[head]
    assert f"; --mode sync: {other:.3f})" in lines[head]
    assert lines[head + 1].startswith("  modes: async for ") and "arm_offload" in lines[head + 1]
    assert lines[head + 2].startswith("  with --mode sync (the host thread waits, busy, for each offload): low ")
    forced = render_terminal(project(make_input(INFLATE), BF3, mode="sync")).splitlines()
    line = next(ln for ln in forced if ln.startswith("Speedup of the recorded job:"))
    assert "as --mode sync sets; each mechanism's own mode (no --mode): " in line


def test_an_older_projection_without_the_fields_says_nothing_of_modes():
    d = project(make_input(INFLATE), BF3).as_json()
    del d["speedup"]["modes"], d["speedup"]["other_mode"]
    text = render_terminal(d)
    assert "assumes" not in text and "modes:" not in text
    assert offload_modes.details(project(make_input(INFLATE), BF3, compare_modes=False).speedup) == []


def test_regime_words_for_a_single_process_job():
    one = critical_path.speedup(job([rank(5.0, peer=5.0)], net=1.0))
    assert one["regime"] == "peer-wait"
    assert one["regime_why"] == "the job's main thread waits on its process's other threads, whose work the offload frees"
    inline = critical_path.speedup(job([rank(10.0, freed=4.0)], freed=4.0))
    assert "rank" not in inline["regime_why"] and "the job's main thread itself" in inline["regime_why"]
    two = critical_path.speedup(job([rank(5.0, peer=5.0), rank(5.0, peer=5.0, pid=11)], net=1.0))
    assert two["regime_why"] == "the rank thread waits on the collective and its peers, whose work the offload frees"


def test_a_sweep_whose_speedup_cannot_move_says_why():
    # the swept mechanism frees only another process's CPU: freed CPU moves, the job's speedup does not
    inp = make_input({"compute.torch": 5.0}, {"compression.user": 2.0})
    sw = sweep(inp, BF3, "arm_offload.alpha", 0.2, 1.0, 3)
    assert not sw["flat"] and sw["speedup_flat"]
    assert sw["points"][0]["freed_s"] < sw["points"][-1]["freed_s"]
    assert sw["flat_reason"].startswith("the freed CPU moves (") and "all of the change in other processes" in \
        sw["flat_reason"]
    moving = sweep(make_input(INFLATE), BF3, "arm_offload.alpha", 0.2, 1.0, 3)
    assert not moving["speedup_flat"] and moving["flat_reason"] is None
    p = project(inp, BF3).as_json()
    p["sweep"] = sw
    assert "  Speedup flat: the freed CPU moves" in render_terminal(p)

