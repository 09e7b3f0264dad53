"""``dpuprof report --time``: adjacent windows add up to the whole, on every fixture; the data lost
as shares, worst first, in every format; the recorder left out of every stack view."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from test_report_render import FIXTURE_PARAMS, cli, render, report_for, synth  # noqa: E402,F401

from dpuprof.categories import CATEGORIES  # noqa: E402
from dpuprof.recording import load  # noqa: E402
from dpuprof.render.build import build_report  # noqa: E402
from dpuprof.render.formats.folded import parse_folded  # noqa: E402
from dpuprof.render.losses import losses  # noqa: E402


def _totals(rep) -> dict:
    s = rep.main.summary.contract
    out = {f"host.{c}": s["host_cpu"]["by_category"][c] for c in CATEGORIES}
    out |= {f"wl.{c}": s["workload_cpu"]["by_category"][c] for c in CATEGORIES}
    out |= {"idle": s["host_cpu"]["idle_s"], "duration": s["duration_s"], "tx": s["net"]["tx_bytes"],
            "read": s["io"]["read_bytes"], "softirq": sum(s["softirq_s"].values())}
    out |= {f"lost.{k}": v for k, v in s["lost"].items()}
    out["stacks"] = sum(parse_folded(render(rep, "folded").main.decode()).values())
    return out


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_adjacent_windows_add_up(fixture):
    whole = report_for(fixture)
    length = whole.main.duration_s
    cut = round(length / 3, 1)
    parts = [build_report([fixture], time_range=r) for r in (f"0:{cut}", f"{cut}:{2 * cut}", f"{2 * cut}:")]
    want, got = _totals(whole), [_totals(p) for p in parts]
    for key, value in want.items():
        assert sum(g.get(key, 0) for g in got) == pytest.approx(value, rel=1e-9, abs=1e-5), key
    ids = [set(p.runs[0].recording.table("intervals")["interval"]) for p in parts]
    assert not (ids[0] & ids[1]) and not (ids[1] & ids[2])
    assert all(p.main.summary.window["intervals"] > 0 for p in parts)


def test_steady_window_is_named_in_every_format(tmp_path):
    fixture = FIXTURE_PARAMS[0].values[0]
    if fixture is None:
        pytest.skip("no fixture")
    rep = build_report([fixture], time_range="steady")
    win = rep.main.summary.window
    assert 0 < win["intervals"] < len(load(fixture).table("intervals"))
    assert json.loads(render(rep, "json").main)["window"] == win
    for fmt in ("terminal", "markdown", "html"):
        text = render(rep, fmt, tmp_path if fmt == "markdown" else None).main.decode()
        assert "time window" in text and win["how"].split(":")[0] in text


def test_bad_time_range_is_one_line(tmp_path):
    fixture = FIXTURE_PARAMS[0].values[0] or "x.rec"
    for bad in ("5", "9:3", "a:b", "900:1000"):
        res = cli(fixture, "--time", bad)
        assert res.returncode != 0 and len(res.stderr.strip().splitlines()) == 1, (bad, res.stderr)
        assert "--time" in res.stderr and "Traceback" not in res.stderr


# ------------------------------------------------------------------------------------ losses

def _tables(**kw) -> dict:
    empty = {"lost": ["interval", "kind", "count"], "cpu_category": ["samples"], "softirq": ["count"],
             "net_io": ["direction", "packets"], "block_io": ["ios"], "events": ["event", "count"]}
    return {k: kw.get(k, pd.DataFrame(columns=cols)) for k, cols in empty.items()}


def test_losses_are_shares_of_what_they_affect_worst_first():
    t = _tables(lost=pd.DataFrame({"interval": [0, 1, 0, 0, 0, 0], "count": [50, 50, 10, 5, 7, 3],
                                   "kind": ["missed_softirq_exit", "missed_softirq_exit", "user_stack_lost",
                                            "samples_map_full", "missed_something_new", "missed_net_dev_xmit"]}),
                cpu_category=pd.DataFrame({"samples": [995]}), softirq=pd.DataFrame({"count": [900]}),
                net_io=pd.DataFrame({"direction": ["tx", "rx"], "packets": [297, 5]}))
    found = losses(t)
    assert [x.kind for x in found] == ["missed_softirq_exit", "user_stack_lost", "missed_net_dev_xmit",
                                       "samples_map_full", "missed_something_new"]
    assert found[0].share == pytest.approx(100 / 1000) and found[0].of == 1000
    assert found[1].share == pytest.approx(10 / 995)  # the sample was kept, only its stack is missing
    assert found[2].share == pytest.approx(3 / 300) and found[2].what == "transmitted packets"
    assert found[3].share == pytest.approx(5 / 1000)  # a lost sample is not among the 995 taken
    assert found[4].share is None and "not recorded" in found[4].text()
    assert losses(_tables()) == []


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_every_format_shows_the_worst_loss_first(fixture, tmp_path):
    rep = report_for(fixture)
    shares = rep.main.summary.lost_shares
    assert shares and shares == sorted(shares, key=lambda x: (x["share"] is None, -(x["share"] or 0), -x["count"], x["kind"]))
    worst = shares[0]
    assert json.loads(render(rep, "json").main)["lost_shares"][0] == worst
    # a kind whose denominator is not recorded (share None) is listed by its count
    line = (f"{worst['kind']} {worst['count']:,} {worst['what']}" if worst["share"] is None
            else f"{worst['kind']} {100 * worst['share']:.2f} % of {worst['of']:,}")
    for fmt in ("terminal", "markdown", "html"):
        text = render(rep, fmt, tmp_path if fmt == "markdown" else None).main.decode().replace("\\_", "_")
        assert line in text, fmt
        assert "more kinds" not in text
        assert all(x["kind"] in text for x in shares)  # no kind hidden


# ---------------------------------------------------------------------------- recorder

@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_the_recorder_is_left_out_of_every_stack_view(fixture, tmp_path):
    rec = load(fixture)
    rpid = rec.meta["recorder_pid"]
    ss = rec.table("stack_samples")
    assert ss.loc[ss["pid"] == rpid, "samples"].sum() > 0  # the fixture does hold recorder stacks
    comm = rec.table("processes").set_index("pid").at[rpid, "comm"]
    others = set(rec.table("processes").query("pid != @rpid")["comm"])
    rep = report_for(fixture)
    if comm not in others:
        roots = {k.split(";")[0] for k in parse_folded(render(rep, "folded").main.decode())}
        assert comm not in roots
        speed = json.loads(render(rep, "speedscope").main)
        assert comm not in {f["name"] for f in speed["shared"]["frames"]}
        assert f">{comm}<" not in render(rep, "html").main.decode().split("svg class=\"flame", 1)[-1]
    # still counted in host CPU, under its own label
    assert rep.main.summary.contract["recorder"]["cpu_s"] > 0
    assert "dpuprof recorder" in render(rep, "terminal").main.decode()


def test_a_windowed_report_leaves_the_whole_run_projection_out(synth):
    rep = build_report([synth], time_range="0:5")
    assert rep.main.projection is None and "projection" not in rep.main.summary.contract
    assert any("projection is left out" in w for w in rep.main.warnings)
    assert build_report([synth]).main.projection is not None
