"""Ring all-reduce extrapolated to N nodes with the alpha-beta model, TCP against RDMA.

    T(p, S) = 2 (p - 1) * lat + 2 (p - 1) / p * S / B

(p ranks, S bytes per all-reduce, one-way latency ``lat``, per-rank bandwidth ``B``; the bandwidth
term is nccl-tests' bus-bandwidth formula, https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).

From the recording: the job's TCP payload gives the bytes each rank all-reduced, and its send
calls bound the number of all-reduce operations. For ``p_rec`` recorded ranks in a ring, each rank
sends ``2 (p_rec - 1) / p_rec * S`` bytes per all-reduce in ``2 (p_rec - 1)`` sends.
"""

from __future__ import annotations

from dpuprof.project.features import Features
from dpuprof.project.profiles import Profile


def ring_time_s(p: int, size_bytes: float, latency_s: float, bandwidth_Bps: float) -> float:
    """alpha-beta ring all-reduce time in seconds (0 for a single rank)."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * latency_s + 2 * (p - 1) / p * size_bytes / bandwidth_Bps


def project(feats: Features, profile: Profile, nodes: int, gpus_per_node: int, duration_s: float,
            network_cpu_s: float, rdma_cost_ns: float | None) -> tuple[dict | None, list[str]]:
    """The ``allreduce`` block of a projection, or (None, warnings) when it cannot be computed.

    ``network_cpu_s``: host network CPU seconds measured (to price TCP's host CPU per byte);
    ``rdma_cost_ns``: host CPU per RDMA work request (o0 + L + Q of the profile's rdma mechanism).
    """
    warnings: list[str] = []
    if profile.allreduce is None:
        return None, [f"DPU profile {profile.name} has no allreduce parameters: no all-reduce extrapolation"]
    s = feats.sockets
    tx = s["wl_send_bytes"]
    if tx <= 0:
        return None, ["no collective traffic recorded (no TCP payload sent by the workload): "
                      "no all-reduce extrapolation"]
    p_rec = max(1, s["senders"])
    ring = 2 * (p_rec - 1) / p_rec if p_rec > 1 else 1.0
    per_rank_sent = tx / p_rec
    total_per_rank = per_rank_sent / ring  # bytes all-reduced by each rank over the recording
    sends_per_rank = s["wl_send_calls"] / p_rec
    ops = max(1.0, sends_per_rank / (2 * (p_rec - 1))) if p_rec > 1 else max(1.0, sends_per_rank)
    size = total_per_rank / ops

    p = nodes * gpus_per_node
    ar = {k: float(v.value) for k, v in profile.allreduce.items()}
    line = float(profile.cap("line_rate_gbps"))
    rdma_bw = line / gpus_per_node * 1e9 / 8
    tcp_bw = min(ar["tcp_flow_gbps"], line / gpus_per_node) * 1e9 / 8
    tcp = ring_time_s(p, size, ar["tcp_latency_us"] * 1e-6, tcp_bw)
    rdma = ring_time_s(p, size, ar["rdma_latency_us"] * 1e-6, rdma_bw)
    all_sent = s["all_send_bytes"] or tx
    cpu_per_byte = network_cpu_s / all_sent if all_sent > 0 else 0.0
    sent_per_op = 2 * (p - 1) / p * size if p > 1 else 0.0
    out = {
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "ranks": p,
        "recorded_ranks": p_rec,
        "bytes_per_step": round(size, 3),
        "ops_recorded": round(ops, 3),
        "bytes_total_per_rank": round(total_per_rank, 3),
        "tcp_us": round(tcp * 1e6, 3),
        "rdma_us": round(rdma * 1e6, 3),
        "tcp_total_s": round(tcp * ops, 6),
        "rdma_total_s": round(rdma * ops, 6),
        "recorded_duration_s": round(duration_s, 6),
        "tcp_host_cpu_us_per_step": round(cpu_per_byte * sent_per_op * 1e6, 3),
        "rdma_host_cpu_us_per_step": None if rdma_cost_ns is None else round(2 * (p - 1) * rdma_cost_ns / 1e3, 3),
        "parameters": {k: v.as_dict() for k, v in profile.allreduce.items()} | {
            "line_rate_gbps": profile.capacity["line_rate_gbps"].as_dict()},
        "assumptions": [
            "a 'step' is one all-reduce operation: the recording has no step markers, so the number of "
            f"operations is bounded from the workload's send calls ({sends_per_rank:.0f} per rank / "
            f"2(p-1) with p = {p_rec} recorded ranks); the latency term is therefore an upper bound",
            "the workload's TCP payload is its collective traffic (loopback in the fixtures stands in for "
            "the inter-node network)",
            f"one NIC of {line:g} Gb/s per node shared by its {gpus_per_node} ranks; every ring hop, "
            "intra-node ones included, pays the network latency (conservative for NVLink hops)",
            f"TCP: one flow per rank capped at {ar['tcp_flow_gbps']:g} Gb/s (one core) and "
            f"{ar['tcp_latency_us']:g} us per hop; RDMA: line rate and {ar['rdma_latency_us']:g} us per hop",
            "tcp_host_cpu_us_per_step = measured network CPU seconds per payload byte sent x bytes each rank "
            "sends per all-reduce (per-byte only: per-message costs at large p are not included, so it is a "
            "lower bound); rdma_host_cpu_us_per_step = 2(p-1) work requests x (o0 + L + Q) of the profile's rdma "
            "mechanism (an upper bound: L is charged although doorbell writes are posted); the two are not "
            "like for like",
        ],
    }
    if p_rec < 2:
        warnings.append("only one rank sent collective traffic in the recording; all-reduce size taken "
                        "as its sent bytes")
    return out, warnings
