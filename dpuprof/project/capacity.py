"""DPU capacity: demand beyond the card's engines or cores stays on the host, and is flagged.

``apply(rows, profile, features, duration_s)`` returns the rows with ``cap_factor`` set (the
fraction of each row's alpha the device has capacity for) and a list of capacity records:

    {"resource", "unit", "demand", "limit", "bottleneck", "action", "note"}

Resources (``profiles.RESOURCES``), demand over the recording's duration:
- ``line_rate_gbps``: network bytes per second in the busier direction (all devices, loopback
  included as the stand-in for inter-node traffic). Traffic cannot fall back to the host, so an
  excess is only flagged as a bottleneck.
- ``crypto_gbps``: for inline crypto the same bytes, as an upper bound of the encrypted traffic; for
  a lookaside engine the bytes its offloaded CPU time processed; the excess share of crypto work
  stays on the host.
- ``arm_cores``: Arm core-seconds the offloaded work needs, ``alpha x before_s / A`` (A < 1 on
  the Arm cores), against ``arm_cores x duration``; the excess stays on the host.
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


def apply(rows: pd.DataFrame, profile: Profile, feats: Features, duration_s: float) -> tuple[pd.DataFrame, list[dict]]:
    """Set ``cap_factor`` per row; return (rows, capacity records)."""
    rows = rows.copy()
    records: list[dict] = []
    if rows.empty:
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
        factor = 1.0
        if resource == "line_rate_gbps":
            demand = _net_gbps(feats, duration_s)
            action = "flagged: traffic above line rate would make the network the bottleneck"
            note = "busier direction of all recorded devices (loopback included)"
        elif resource == "crypto_gbps":
            lookaside = sel[sel["n_from"] == "cpu_chunks"]
            inline = sel[sel["n_from"] != "cpu_chunks"]
            demand = _net_gbps(feats, duration_s) if not inline.empty else 0.0
            if not lookaside.empty and duration_s > 0:
                demand += float((lookaside["alpha"] * lookaside["before_s"] * lookaside["host_bytes_per_cpu_s"]).sum()
                                ) * 8 / duration_s / 1e9
            action = "excess crypto work stays on the host"
            note = ("inline: all recorded traffic counted as encrypted (upper bound); lookaside: bytes the "
                    "offloaded CPU time processed at host_bytes_per_cpu_s")
            factor = min(1.0, limit / demand) if demand > limit else 1.0
        elif resource == "arm_cores":
            need = (sel["alpha"] * sel["before_s"] / sel["A"]).sum()  # A = inf needs no Arm time
            demand = need / duration_s if duration_s > 0 else 0.0
            action = "excess work stays on the host"
            note = "Arm core-seconds needed = offloaded host seconds / A (Arm speed relative to a host core)"
            factor = min(1.0, limit / demand) if demand > limit else 1.0
        elif resource == "compression_engine_host_cores":
            demand = (sel["alpha"] * sel["before_s"]).sum() / duration_s if duration_s > 0 else 0.0
            action = "excess work stays on the host"
            note = "offloaded host CPU seconds per second, against the engine's throughput in host cores"
            factor = min(1.0, limit / demand) if demand > limit else 1.0
        else:  # pragma: no cover - profiles.RESOURCES is closed
            continue
        bottleneck = demand > limit
        if factor < 1.0:
            rows.loc[sel.index, "cap_factor"] = factor
        records.append({"resource": resource, "unit": UNITS[resource], "demand": round(float(demand), 6),
                        "limit": float(limit), "bottleneck": bool(bottleneck),
                        "action": action if bottleneck else "within capacity", "note": note,
                        "mechanisms": sorted(set(sel["mechanism"]))})
    return rows, records
