"""DPU capacity: demand beyond the card's engines or cores stays on the host, and is flagged.

``apply(rows, profile, features, duration_s, rate=1.0, rate_source=...)`` returns the rows with
``cap_factor`` set (the fraction of each row's alpha the device has capacity for) and a list of
capacity records:

    {"resource", "unit", "demand", "limit", "bottleneck", "action", "note", "mechanisms",
     "rate_factor", "rate_source"}

Demand is checked at the **post-offload rate**: the job runs ``rate`` times faster after the
offload, so the job's part of every per-second demand is multiplied by ``rate`` (other processes'
part, e.g. softirq for other tenants, stays at the recorded rate); ``rate`` is the self-consistent
expected speedup (``at_post_offload_rate``; 1.0 = the recorded rate). Resources
(``profiles.RESOURCES``):

- ``line_rate_gbps``: network bytes per second in the busier direction (all devices, loopback
  included as the stand-in for inter-node traffic). Traffic cannot fall back to the host, so an
  excess is only flagged as a bottleneck.
- ``crypto_gbps``: inline rows: the bytes their offloaded crypto CPU processed (``alpha x C x
  host_bytes_per_cpu_s``, measured from codec_calls where recorded), at most the traffic that
  leaves the host (non-loopback devices; loopback only when it is all the recording has, as the
  stand-in); lookaside rows: the bytes their offloaded CPU time processed. The excess share stays
  on the host.
- ``arm_cores``: Arm core-seconds the offloaded work needs, ``alpha x C / A`` (A < 1 on the Arm
  cores), against ``arm_cores x duration``; this is where A matters for async Arm work.
- ``compression_engine_host_cores``: offloaded host-core seconds against the engine's throughput in
  host-core equivalents x duration; the excess stays on the host.
"""

from __future__ import annotations

import pandas as pd

from dpuprof.project.features import Features
from dpuprof.project.profiles import Profile

UNITS = {"line_rate_gbps": "Gb/s", "crypto_gbps": "Gb/s", "arm_cores": "cores",
         "compression_engine_host_cores": "host-core equivalents"}


def _net_gbps(feats: Features, duration_s: float) -> float:
    net = feats.net
    return 8.0 * max(net["tx_bytes"], net["rx_bytes"]) / duration_s / 1e9 if duration_s > 0 else 0.0


def _wire_bytes(feats: Features) -> tuple[float, str]:
    """Bytes in the busier direction of the traffic that leaves the host, and what was counted."""
    net = feats.net
    off_tx, off_rx = net.get("off_host_tx_bytes", 0.0), net.get("off_host_rx_bytes", 0.0)
    if off_tx + off_rx > 0:
        return max(off_tx, off_rx), "non-loopback devices"
    return max(net["tx_bytes"], net["rx_bytes"]), "loopback, the recording's stand-in for inter-node traffic"


#: How closely the post-offload rate is solved (relative): a row whose capacity binds frees CPU in
#: proportion to the rate, so its freed seconds, and the speedup, carry this much of the solver's slack.
RATE_TOL = 1e-4


def at_post_offload_rate(at, tol: float = RATE_TOL, iterations: int = 40):
    """Solve for the rate the job runs at after the offload, with capacity checked at that rate.

    ``at(rate)`` -> (evaluated rows, capacity records, expected speedup or None = unbounded), with
    capacity applied at ``rate``. The expected speedup ``f(rate)`` falls as the rate rises (more
    demand, less capacity left per second), so the self-consistent rate ``r = f(r)`` lies in
    ``[1, f(1)]``; it is found by bracketed regula falsi (Illinois). Returns (rows, records, rate,
    how it was chosen); each record gets ``rate_factor`` and ``rate_source``.
    """
    rows, caps, e1 = at(1.0)
    if e1 is None:
        return _tag(rows, caps, 1.0, "the recorded rate: the projected speedup is unbounded (the job's own CPU "
                    "would vanish), so no post-offload rate can be derived; demand is a lower bound")
    if e1 <= 1.0 + tol:
        return _tag(rows, caps, 1.0, "the recorded rate: the projected speedup is 1, so the job runs no faster")
    hi = float(e1)
    res_hi = at(hi)
    if res_hi[2] is None or res_hi[2] >= hi * (1 - tol):
        return _tag(res_hi[0], res_hi[1], hi, f"the post-offload rate: recorded rate x {hi:.4g}, the projected "
                    "expected speedup (no capacity limit binds at that rate)")
    lo, g_lo = 1.0, e1 - 1.0
    g_hi = res_hi[2] - hi
    best, side = (lo, (rows, caps)), 0
    for _ in range(iterations):
        r = hi - g_hi * (hi - lo) / (g_hi - g_lo)
        if not lo < r < hi:
            r = 0.5 * (lo + hi)
        ev, cp, e = at(r)
        g = (1e6 if e is None else e) - r
        if g >= 0:
            lo, g_lo, best = r, g, (r, (ev, cp))
            if side == 1:
                g_hi *= 0.5  # Illinois step: keep the stale end from stalling convergence
            side = 1
        else:
            hi, g_hi = r, g
            if side == -1:
                g_lo *= 0.5
            side = -1
        if abs(g) <= tol * r:
            best = (r, (ev, cp))  # self-consistent within tol, whichever side
            break
        if hi - lo <= tol * lo:
            break
    rate, (rows, caps) = best
    return _tag(rows, caps, rate, f"the post-offload rate: recorded rate x {rate:.4g}, the self-consistent "
                "expected speedup (the job runs that much faster with the capacity-limited offload, and "
                "capacity is checked at that rate)")


def _tag(rows, caps, rate: float, why: str):
    for c in caps:
        c["rate_factor"], c["rate_source"] = round(float(rate), 6), why
    return rows, caps, rate, why


def _seconds(sel: pd.DataFrame, rate: float) -> pd.Series:
    """Offloaded host seconds per row at the post-offload rate: only the job's part speeds up."""
    job = sel["workload_before_s"].clip(upper=sel["before_s"])
    return sel["alpha"] * (job * rate + (sel["before_s"] - job))


def _traffic_scale(feats: Features, rate: float) -> float:
    """Factor on recorded traffic: the job's share of socket bytes runs ``rate`` times faster."""
    s = feats.sockets
    share = min(1.0, s["wl_bytes"] / s["all_bytes"]) if s["all_bytes"] > 0 else 1.0
    return share * rate + (1.0 - share)


def _crypto_demand(sel: pd.DataFrame, feats: Features, duration_s: float, rate: float) -> tuple[float, str]:
    """Crypto Gb/s at the post-offload rate and a note on how the bytes were counted."""
    inline = sel[sel["n_from"] != "cpu_chunks"]
    lookaside = sel[sel["n_from"] == "cpu_chunks"]
    gbps, notes = 0.0, []
    if not inline.empty:
        host_rate = pd.to_numeric(inline["host_bytes_per_cpu_s"], errors="coerce")
        wire, what = _wire_bytes(feats)
        wire *= _traffic_scale(feats, rate)
        if host_rate.notna().all():
            enc = min(float((_seconds(inline, rate) * host_rate).sum()), wire)
            notes.append(f"inline: bytes the offloaded crypto CPU processed (alpha x C x host_bytes_per_cpu_s), "
                         f"at most the traffic that leaves the host ({what})")
        else:
            enc = wire
            notes.append(f"inline: no host AES rate for every inline slice, so all traffic counted as encrypted "
                         f"({what}; an upper bound)")
        gbps += 8 * enc / duration_s / 1e9
    if not lookaside.empty:
        gbps += float((_seconds(lookaside, rate) * lookaside["host_bytes_per_cpu_s"]).sum()) * 8 / duration_s / 1e9
        notes.append("lookaside: bytes the offloaded CPU time processed at host_bytes_per_cpu_s")
    return gbps, "; ".join(notes)


def apply(rows: pd.DataFrame, profile: Profile, feats: Features, duration_s: float, rate: float = 1.0,
          rate_source: str = "the recorded rate") -> tuple[pd.DataFrame, list[dict]]:
    """Set ``cap_factor`` per row; return (rows, capacity records). See the module doc."""
    rows = rows.copy()
    records: list[dict] = []
    if rows.empty or duration_s <= 0:
        return rows, records
    rows["cap_factor"] = 1.0
    active = rows[rows["mechanism"].notna() & (rows["alpha"] > 0) & (rows["before_s"] > 0)]
    resources = set(active["resource"].dropna())
    if profile.cap("line_rate_gbps") is not None and _net_gbps(feats, duration_s) > 0:
        resources.add("line_rate_gbps")  # all traffic crosses the card, offloaded or not
    for resource in sorted(resources):
        limit = profile.cap(resource)
        if limit is None:
            continue
        sel = active[active["resource"] == resource]
        if resource == "line_rate_gbps":
            demand = _net_gbps(feats, duration_s) * _traffic_scale(feats, rate)
            action = "flagged: traffic above line rate would make the network the bottleneck"
            note = ("busier direction of all recorded devices (loopback included); the job's share of socket "
                    "bytes at the post-offload rate")
        elif resource == "crypto_gbps":
            demand, note = _crypto_demand(sel, feats, duration_s, rate)
            action = "excess crypto work stays on the host"
        elif resource == "arm_cores":
            demand = float((_seconds(sel, rate) / sel["A"]).sum()) / duration_s  # A = inf: no Arm time
            action = "excess work stays on the host"
            note = "Arm core-seconds needed = offloaded host seconds / A (Arm speed relative to a host core)"
        elif resource == "compression_engine_host_cores":
            demand = float(_seconds(sel, rate).sum()) / duration_s
            action = "excess work stays on the host"
            note = "offloaded host CPU seconds per second, against the engine's throughput in host cores"
        else:  # pragma: no cover - profiles.RESOURCES is closed
            continue
        bottleneck = demand > limit
        factor = min(1.0, limit / demand) if bottleneck and resource != "line_rate_gbps" else 1.0
        if factor < 1.0:
            rows.loc[sel.index, "cap_factor"] = factor
        records.append({"resource": resource, "unit": UNITS[resource], "demand": round(float(demand), 6),
                        "limit": float(limit), "bottleneck": bool(bottleneck),
                        "action": action if bottleneck else "within capacity", "note": note,
                        "mechanisms": sorted(set(sel["mechanism"])), "rate_factor": round(float(rate), 6),
                        "rate_source": rate_source})
    return rows, records
