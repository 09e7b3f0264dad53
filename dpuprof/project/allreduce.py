"""All-reduce extrapolated to N nodes x G ranks per node with alpha-beta models, TCP against RDMA.

Algorithms (S bytes per all-reduce, p = N x G ranks; lat one-way latency per hop, B bandwidth):

- ``ring`` (flat, all p ranks): ``T = 2 (p - 1) lat + 2 (p - 1) / p * S / B``; B is the slowest hop,
  ``min(NIC, intra-node link)``, and lat the slowest hop's latency. The ring leaves each node
  through **one** hop, so that hop has the whole NIC: the NIC is not divided by G.
- ``tree`` (NCCL's double binary tree): latency ``2 (ceil(log2 N) lat_net + (G - 1) lat_intra)``
  (inter-node tree, intra-node chain); bandwidth term taken equal to the ring's (assumption: the
  pipelined double binary tree runs at full bandwidth, Jeaugey, "Massively scale your deep learning
  training with NCCL 2.4", NVIDIA blog, 2019).
- ``hierarchical``: intra-node reduce-scatter, G inter-node rings of S/G bytes each (one per local
  rank, all sharing the node's NIC), intra-node all-gather:
  ``2 (G - 1) lat_i + 2 (G - 1) / G * S / B_i + 2 (N - 1) lat_net + 2 (N - 1) / N * S / B_node``
  where B_node is the node's NIC bandwidth shared by its G rings.

Bus bandwidth follows nccl-tests (doc/PERFORMANCE.md): ``algbw = S / T``, ``busbw = algbw x 2 (n - 1) / n``
for all-reduce, so a ring with lat = 0 has busbw = B.

The operation count, bytes per operation and measured duration come from the ``collectives``
table (schema v2 uprobes) when present; otherwise they are **estimated** from ``sock_io`` (and
step ``markers`` where recorded), and the block says how.
"""

from __future__ import annotations

import math

from dpuprof.project.features import Features
from dpuprof.project.profiles import Profile

ALGORITHMS = ("ring", "tree", "hierarchical")
#: The vendor brief's all-reduce figure (render/tables.py VENDOR) and the scale it names.
VENDOR_FIGURE = "~500 µs → ~180 µs (256 GPUs)"
VENDOR_NODES, VENDOR_GPUS_PER_NODE = 32, 8
#: Message sizes for the like-for-like row: the brief names none. 8 B is nccl-tests' smallest
#: default size (-b 8, latency-bound); 25 MiB is PyTorch DDP's default bucket (bucket_cap_mb = 25).
VENDOR_SIZES = (8, 25 * 1024 * 1024)


def ring_time_s(p: int, size_bytes: float, latency_s: float, bandwidth_Bps: float) -> float:
    """alpha-beta ring all-reduce time in seconds (0 for a single rank)."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * latency_s + 2 * (p - 1) / p * size_bytes / bandwidth_Bps


def tree_time_s(nodes: int, gpn: int, size_bytes: float, lat_net: float, lat_intra: float,
                bandwidth_Bps: float) -> float:
    """Double-binary-tree all-reduce: log-depth latency across nodes, chain within, full bandwidth."""
    p = nodes * gpn
    if p <= 1:
        return 0.0
    depth = math.ceil(math.log2(nodes)) if nodes > 1 else 0
    return 2 * (depth * lat_net + (gpn - 1) * lat_intra) + 2 * (p - 1) / p * size_bytes / bandwidth_Bps


def hierarchical_time_s(nodes: int, gpn: int, size_bytes: float, lat_net: float, node_Bps: float,
                        lat_intra: float, intra_Bps: float) -> float:
    """Intra-node reduce-scatter + G inter-node rings sharing the NIC + intra-node all-gather."""
    intra = 0.0 if gpn <= 1 else 2 * (gpn - 1) * lat_intra + 2 * (gpn - 1) / gpn * size_bytes / intra_Bps
    inter = 0.0 if nodes <= 1 else 2 * (nodes - 1) * lat_net + 2 * (nodes - 1) / nodes * size_bytes / node_Bps
    return intra + inter


def bus_bandwidth_Bps(p: int, size_bytes: float, time_s: float) -> float | None:
    """nccl-tests' all-reduce bus bandwidth: S / T x 2 (p - 1) / p (None when T is 0)."""
    if time_s <= 0 or p <= 1:
        return None
    return size_bytes / time_s * 2 * (p - 1) / p


def _links(profile: Profile, transport: str, gpn: int) -> dict:
    """Latencies (s) and bandwidths (B/s) of one transport: flat-ring NIC hop, node NIC, intra-node."""
    ar = {k: float(v.value) for k, v in profile.allreduce.items()}
    line = float(profile.cap("line_rate_gbps")) * 1e9 / 8
    lat_net = ar[f"{transport}_latency_us"] * 1e-6
    if transport == "tcp":
        flow = ar["tcp_flow_gbps"] * 1e9 / 8
        hop, node = min(flow, line), min(gpn * flow, line)  # one flow per ring; G rings in hierarchical
    else:
        hop = node = line
    intra = ar.get("intra_node_gbps")
    lat_i = ar.get("intra_node_latency_us")
    return {"lat_net": lat_net, "hop": hop, "node": node,
            "intra": hop if intra is None else intra * 1e9 / 8,
            "lat_intra": lat_net if lat_i is None else lat_i * 1e-6}


def model(profile: Profile, nodes: int, gpn: int, size: float) -> dict:
    """{algorithm: {tcp_us, rdma_us, tcp_busbw_gbps, rdma_busbw_gbps}} plus the fastest per transport."""
    p = nodes * gpn
    out: dict = {}
    for alg in ALGORITHMS:
        out[alg] = {}
    for transport in ("tcp", "rdma"):
        k = _links(profile, transport, gpn)
        slow_bw = min(k["hop"], k["intra"]) if nodes > 1 else k["intra"]
        slow_lat = max(k["lat_net"], k["lat_intra"]) if nodes > 1 else k["lat_intra"]
        times = {
            "ring": ring_time_s(p, size, slow_lat, slow_bw),
            "tree": tree_time_s(nodes, gpn, size, k["lat_net"], k["lat_intra"], slow_bw),
            "hierarchical": hierarchical_time_s(nodes, gpn, size, k["lat_net"], k["node"], k["lat_intra"],
                                                k["intra"]),
        }
        for alg, t in times.items():
            bus = bus_bandwidth_Bps(p, size, t)
            out[alg][f"{transport}_us"] = round(t * 1e6, 3)
            out[alg][f"{transport}_busbw_gbps"] = None if bus is None else round(bus * 8 / 1e9, 3)
    best = {t: min(ALGORITHMS, key=lambda a: out[a][f"{t}_us"]) for t in ("tcp", "rdma")}
    return {"algorithms": out, "algorithm": best}


def operations(feats: Features) -> dict | None:
    """Per-rank all-reduce count, bytes per op, measured duration per op, and the method used.

    Measured: ``collectives`` rows whose op names an all-reduce. Estimated otherwise: one op per
    step marker (a lower bound of the count), or the send calls / 2(p - 1) (an upper bound: a
    transport splits one all-reduce into many sends). None without collective traffic.
    """
    coll = feats.inp.table("collectives")
    if not coll.empty:
        ar = coll[coll["op"].astype(str).str.replace("_", "").str.lower().str.contains("allreduce")]
        if not ar.empty and float(ar["count"].sum()) > 0:
            ranks = max(1, int(ar["pid"].nunique()))
            count = float(ar["count"].sum())
            return {"method": f"measured: collectives table (uprobes), {count:.0f} all-reduce calls by {ranks} "
                              "rank(s)", "measured": True, "recorded_ranks": ranks, "ops": count / ranks,
                    "size": float(ar["bytes"].sum()) / count,
                    "measured_us_per_op": float(ar["duration_ns"].sum()) / count / 1e3}
    s = feats.sockets
    tx = s["wl_send_bytes"]
    if tx <= 0:
        return None
    p_rec = max(1, s["senders"])
    ring = 2 * (p_rec - 1) / p_rec if p_rec > 1 else 1.0
    per_rank = tx / p_rec / ring  # bytes all-reduced by each rank over the recording
    markers = feats.inp.table("markers")
    steps = markers[markers["kind"] == "step"] if not markers.empty else markers
    if not steps.empty:
        ops = max(1.0, len(steps) / max(1, int(steps["pid"].nunique())))
        method = (f"estimate: one all-reduce per recorded step ({ops:.0f} steps per rank; a lower bound of the "
                  "count, since DDP all-reduces several buckets per step), bytes from the workload's TCP payload")
    else:
        sends = s["wl_send_calls"] / p_rec
        ops = max(1.0, sends / (2 * (p_rec - 1))) if p_rec > 1 else max(1.0, sends)
        method = (f"estimate: send calls / 2(p-1) ({sends:.0f} sends per rank, p = {p_rec}); an upper bound of "
                  "the count (a transport splits one all-reduce into many sends), so the latency term is an "
                  "upper bound and the bytes per op a lower bound; record with the uprobes probe (dpuprof record without --light, and --probes all or a list naming "
                  "uprobes) for measured counts")
    return {"method": method, "measured": False, "recorded_ranks": p_rec, "ops": ops, "size": per_rank / ops,
            "measured_us_per_op": None}


def vendor_row(profile: Profile) -> dict:
    """The vendor brief's scale (256 GPUs) at stated message sizes, for a like-for-like comparison."""
    rows = []
    for size in VENDOR_SIZES:
        m = model(profile, VENDOR_NODES, VENDOR_GPUS_PER_NODE, size)
        rows.append({"message_bytes": size, "tcp_us": m["algorithms"][m["algorithm"]["tcp"]]["tcp_us"],
                     "rdma_us": m["algorithms"][m["algorithm"]["rdma"]]["rdma_us"], **m})
    return {"vendor": VENDOR_FIGURE, "nodes": VENDOR_NODES, "gpus_per_node": VENDOR_GPUS_PER_NODE,
            "ranks": VENDOR_NODES * VENDOR_GPUS_PER_NODE, "sizes": rows,
            "assumption": "the brief states 256 GPUs but no message size, algorithm or topology: assumed 32 nodes "
                          "x 8 GPUs, one NIC per node, and two sizes, 8 B (nccl-tests' smallest default, "
                          "latency-bound) and 25 MiB (PyTorch DDP's default bucket); the fastest modelled "
                          "algorithm per transport"}


def project_allreduce(feats: Features, profile: Profile, nodes: int, gpus_per_node: int, duration_s: float,
            network_cpu_s: float, rdma_cost_ns: float | None) -> tuple[dict | None, list[str]]:
    """The ``allreduce`` block of a projection, or (None, warnings) when it cannot be computed.

    ``network_cpu_s``: host network CPU seconds measured (to price TCP's host CPU per byte);
    ``rdma_cost_ns``: host CPU per RDMA work request (o0 + L + Q of the profile's rdma mechanism).
    """
    if profile.allreduce is None:
        return None, [f"DPU profile {profile.name} has no allreduce parameters: no all-reduce extrapolation"]
    ops = operations(feats)
    if ops is None:
        return None, ["no collective traffic recorded (no all-reduce calls and no TCP payload sent by the "
                      "workload): no all-reduce extrapolation"]
    warnings: list[str] = []
    size, n_ops = ops["size"], ops["ops"]
    p = nodes * gpus_per_node
    m = model(profile, nodes, gpus_per_node, size)
    best = m["algorithm"]
    tcp = m["algorithms"][best["tcp"]]["tcp_us"] * 1e-6
    rdma = m["algorithms"][best["rdma"]]["rdma_us"] * 1e-6
    s = feats.sockets
    all_sent = s["all_send_bytes"] or s["wl_send_bytes"]
    cpu_per_byte = network_cpu_s / all_sent if all_sent > 0 else 0.0
    sent_per_op = 2 * (p - 1) / p * size if p > 1 else 0.0
    ar = {k: v.as_dict() for k, v in profile.allreduce.items()}
    out = {
        "nodes": nodes, "gpus_per_node": gpus_per_node, "ranks": p, "recorded_ranks": ops["recorded_ranks"],
        "method": ops["method"], "measured": ops["measured"],
        "bytes_per_step": round(size, 3), "bytes_per_op": round(size, 3),
        "ops_recorded": round(n_ops, 3), "bytes_total_per_rank": round(size * n_ops, 3),
        "measured_us_per_op": None if ops["measured_us_per_op"] is None else round(ops["measured_us_per_op"], 3),
        "tcp_us": round(tcp * 1e6, 3), "rdma_us": round(rdma * 1e6, 3), "algorithm": best,
        "algorithms": m["algorithms"],
        "tcp_total_s": round(tcp * n_ops, 6), "rdma_total_s": round(rdma * n_ops, 6),
        "recorded_duration_s": round(duration_s, 6),
        "exceeds_recording": {"tcp": tcp * n_ops > duration_s, "rdma": rdma * n_ops > duration_s},
        "tcp_host_cpu_us_per_step": round(cpu_per_byte * sent_per_op * 1e6, 3),
        "rdma_host_cpu_us_per_step": None if rdma_cost_ns is None else round(2 * (p - 1) * rdma_cost_ns / 1e3, 3),
        "vendor_comparison": vendor_row(profile),
        "parameters": ar | {"line_rate_gbps": profile.capacity["line_rate_gbps"].as_dict()},
        "assumptions": _assumptions(profile, ops, gpus_per_node),
    }
    for transport, t in (("TCP", tcp), ("RDMA", rdma)):
        if t * n_ops > duration_s:
            warnings.append(f"all-reduce: the modelled {transport} time over the recorded operations "
                            f"({t * n_ops:.1f} s at {nodes} x {gpus_per_node} ranks) exceeds the whole recording "
                            f"({duration_s:.1f} s): at that scale the job would be communication-bound, or the "
                            f"operation count is overstated ({ops['method'].split(';')[0]})")
    if ops["recorded_ranks"] < 2 and not ops["measured"]:
        warnings.append("only one rank sent collective traffic in the recording; all-reduce size taken "
                        "as its sent bytes")
    return out, warnings


def _assumptions(profile: Profile, ops: dict, gpn: int) -> list[str]:
    ar = {k: float(v.value) for k, v in profile.allreduce.items()}
    line = float(profile.cap("line_rate_gbps"))
    out = [
        f"operations: {ops['method']}",
        "the workload's collective traffic stands in for the inter-node network (loopback in the fixtures)",
        f"one NIC of {line:g} Gb/s per node; a flat ring or tree leaves each node through one hop with the whole "
        f"NIC; in hierarchical all-reduce the node's {gpn} inter-node rings share it",
        f"TCP: {ar['tcp_flow_gbps']:g} Gb/s per flow (one core per ring channel), {ar['tcp_latency_us']:g} us per "
        f"hop; RDMA: line rate, {ar['rdma_latency_us']:g} us per hop",
        "tcp_us / rdma_us: the fastest modelled algorithm for each transport (as NCCL's tuner picks by its "
        "own model); every algorithm is in 'algorithms' with its nccl-tests bus bandwidth",
        "tcp_host_cpu_us_per_step = measured network CPU seconds per payload byte sent x bytes each rank sends per "
        "all-reduce (per-byte only, a lower bound); rdma_host_cpu_us_per_step = 2(p-1) ring work requests x "
        "(o0 + L + Q) of the profile's rdma mechanism (an upper bound); the two are not like for like",
    ]
    if "intra_node_gbps" not in ar:
        out.append("no intra-node link in the profile: intra-node hops are priced like network hops "
                   "(pessimistic for NVLink)")
    else:
        out.append(f"intra-node hops: {ar['intra_node_gbps']:g} Gb/s, {ar.get('intra_node_latency_us', 0):g} us "
                   "(a property of the GPU server, not of the DPU)")
    return out
