"""The job's speedup from where its ranks wait: a critical-path model by regime.

Over the steady window, a rank's main thread spends its wall time ``D`` on the CPU (``W``), waiting
for a CPU (``R``, run-queue delay) or blocked (``B``, by reason: loader, peer, io, other). Four
bounds limit how fast the job can go; the binding one is the regime:

- **rank path** ``P = D - B_loader``: the rank's own work, its waits for a CPU and for its peers.
  Work the offload frees on the rank thread itself (``F_m``, *inline*) comes straight off it; the
  run-queue delay shrinks as a queue's wait does when the host's utilisation drops
  (``R' = R q(rho') / q(rho)``, ``q(rho) = rho / (1 - rho)``; on a saturated host at most the gap
  between the capacity bound and the rest of the path); waits on peers shrink with the
  network work freed and with the peers' own path (``B_peer' = B_peer (1 - f_net) s``).
- **loader** ``L = max over loaders of busy``: a rank cannot consume batches faster than its
  DataLoader workers make them. A worker's busy time loses its freed CPU and its share of the
  contention. A worker with slack (``L < P``) does not bound the step: freeing its CPU gives ~1.0.
- **CPU capacity** ``K = host busy CPU / cpu_count``: on a saturated host, every freed CPU-second
  anywhere shortens the job (``K' = (busy - F_host) / cpu_count``).
- **GPU** ``G = GPU busy share x D``: CPU offload cannot make the GPU's own work shorter.

``speedup = max(P, L, K, G) / max(P', L', K', G)`` for the slowest rank. ``low`` and ``high``
evaluate the same bounds with the least and the most the freed work could do:

- low: freed CPU two sampling standard deviations smaller; nothing but the freed work itself gets
  shorter (run-queue delay, waits on peers and the host's capacity bound stay as measured);
- high: freed CPU two standard deviations larger; each competitor's freed CPU-second returns a
  full second of the rank's run-queue delay (``R' = max(0, R - F_comp)``), and the capacity bound
  drops by all of it.

Every term of ``low`` is at least that of ``expected``, which is at least that of ``high``, so
``low <= expected <= high`` always holds.
"""

from __future__ import annotations

from dpuprof.project.paths import JobPaths, Loader, RankThread

SATURATED = 0.95  # K >= this share of the rank path: the host's CPU capacity binds
SIGNIFICANT = 0.01  # of the window: freed CPU or waits below this are noise
CASES = ("low", "expected", "high")


def _freed(x: float, sd: float, case: str, cap: float) -> float:
    if case == "low":
        x -= 2 * sd
    elif case == "high":
        x += 2 * sd
    return min(max(0.0, x), cap)


def _queue(rho: float) -> float:
    """rho / (1 - rho): how a queue's waiting time grows with utilisation (M/M/1), capped near 1."""
    rho = min(max(rho, 0.0), 0.999)
    return rho / (1.0 - rho)


def _contention(job: JobPaths, r: RankThread, case: str) -> tuple[float, float]:
    """(c, F_comp): the share of run-queue delay the offload removes, and the CPU freed from
    everyone but ``r`` in seconds.

    Run-queue delay grows with the host's utilisation rho = busy / (cpu_count x window) as a queue
    does, rho / (1 - rho) (M/M/1): so c = 1 - q(rho') / q(rho), with rho' the utilisation left
    after the offload over the same window (the job getting faster only raises it again, so this
    errs low). ``low`` assumes no relief; ``high`` takes the most freed host CPU, and F_comp with the
    rank's own freed CPU at its expected value, so that F_comp(high) >= F_comp(expected).
    """
    if case == "low":
        return 0.0, 0.0
    f_host = _freed(job.host_freed_s, job.host_freed_sd_s, case, job.host_busy_s)
    f_m = min(max(0.0, r.freed_s), r.on_cpu_s)
    others = max(1e-9, job.host_busy_s - r.on_cpu_s)
    f_comp = min(others, max(0.0, f_host - f_m))
    cap = max(1e-9, job.cpu_count * job.window.length_s)
    q0 = _queue(job.host_busy_s / cap)
    c = 0.0 if q0 <= 0 else 1.0 - _queue((job.host_busy_s - f_host) / cap) / q0
    return min(1.0, max(0.0, c)), f_comp


def _core(r: RankThread, case: str, job: JobPaths) -> tuple[float, float]:
    """(on-CPU + run-queue delay) of the rank thread before and after, for ``case``."""
    w_after = r.on_cpu_s - _freed(r.freed_s, r.freed_sd_s, case, r.on_cpu_s)
    c, f_comp = _contention(job, r, case)
    rq = r.runq_s * (1.0 - c)
    if case == "high":  # every freed competitor CPU-second returns a second of run-queue delay
        rq = min(rq, max(0.0, r.runq_s - f_comp))
    return r.on_cpu_s + r.runq_s, w_after + rq


def _loader_after(ld: Loader, case: str, c: float, f_comp: float) -> float:
    """A loader's busy time after the offload: its own freed CPU and its share of contention relief."""
    f = _freed(ld.freed_s, ld.freed_sd_s, case, ld.busy_s)
    rq = ld.runq_s * c
    if case == "high":
        rq = max(rq, min(ld.runq_s, f_comp))
    return max(0.0, ld.busy_s - f - rq)


def _bounds(job: JobPaths, case: str) -> tuple[dict, dict, dict]:
    """Bounds (seconds) before and after for ``case`` (keys rank, loader, capacity, gpu), and the
    terms they came from: ``{"peer_scale": s, "contention": {pid: (c, F_comp)}}``, which
    ``_gains`` reads rather than computing them again.

    On a saturated host (the capacity bound binds before the offload) a rank's run-queue delay is
    the gap between the capacity bound and its contention-free path (D = K = P0 + R), so after the
    offload it is at most that gap again: ``R' <= max(0, K' - P0')``, and the rank path becomes
    ``max(P0', K')`` where the linear relief ``R (1 - c)`` would leave more.
    """
    before = {"rank": 0.0, "loader": 0.0, "capacity": job.host_busy_s / max(1, job.cpu_count), "gpu": 0.0}
    for r in job.ranks:
        before["rank"] = max(before["rank"], r.wall_s - r.wait_s["loader"])
        mine = [ld.busy_s for ld in job.loaders if ld.rank_pid == r.pid]
        before["loader"] = max([before["loader"], *mine])
    saturated = before["capacity"] >= SATURATED * max(before["rank"], before["loader"])
    after = dict(before)
    f_host = _freed(job.host_freed_s, job.host_freed_sd_s, case, job.host_busy_s)
    if case != "low":
        after["capacity"] = (job.host_busy_s - f_host) / max(1, job.cpu_count)
    after["rank"] = after["loader"] = 0.0
    cores = {r.pid: _core(r, case, job) for r in job.ranks}
    shrink = [a / max(1e-9, b) for b, a in cores.values()]
    peer_scale = sum(shrink) / len(shrink) if shrink and case != "low" else 1.0
    f_net = 0.0 if case == "low" else job.net_freed_fraction
    terms = {"peer_scale": peer_scale, "contention": {}}
    for r in job.ranks:
        c, f_comp = terms["contention"][r.pid] = _contention(job, r, case)
        w_after = r.on_cpu_s - _freed(r.freed_s, r.freed_sd_s, case, r.on_cpu_s)
        rq = cores[r.pid][1] - w_after
        p0_after = w_after + r.wait_s["peer"] * (1.0 - f_net) * peer_scale + r.wait_s["io"] + r.wait_s["other"]
        if saturated and case != "low":
            rq = min(rq, max(0.0, after["capacity"] - p0_after))
        after["rank"] = max(after["rank"], p0_after + rq)
        mine = [ld for ld in job.loaders if ld.rank_pid == r.pid]
        if mine:
            after["loader"] = max(after["loader"], max(_loader_after(ld, case, c, f_comp) for ld in mine))
    if job.gpu_busy is not None:
        before["gpu"] = after["gpu"] = job.gpu_busy * job.window.length_s
    return before, after, terms


def _gains(job: JobPaths, terms: dict | None = None) -> dict:
    """Seconds each mechanism takes off the slowest rank's path in the expected case: the freed
    work on the rank thread (inline), run-queue relief (contention), shorter waits on peers
    (peer), and how far the loader bound drops (loader). ``terms``: the expected case's terms
    from ``_bounds`` (computed here when not given)."""
    if terms is None:
        terms = _bounds(job, "expected")[2]
    worst, out = -1.0, {"inline": 0.0, "contention": 0.0, "peer": 0.0, "loader": 0.0}
    scale = terms["peer_scale"]
    for r in job.ranks:
        p = r.wall_s - r.wait_s["loader"]
        if p <= worst:
            continue
        worst = p
        c, f_comp = terms["contention"][r.pid]
        mine = [ld for ld in job.loaders if ld.rank_pid == r.pid]
        out = {"inline": min(r.freed_s, r.on_cpu_s), "contention": r.runq_s * c,
               "peer": r.wait_s["peer"] * (1 - (1 - job.net_freed_fraction) * scale),
               "loader": max((ld.busy_s for ld in mine), default=0.0)
               - max((_loader_after(ld, "expected", c, f_comp) for ld in mine), default=0.0)}
    return out


def regime(job: JobPaths, expected: tuple[dict, dict, dict] | None = None) -> tuple[str, str]:
    """(name, why): the bound that binds before the offload and, for the rank path, what shortens it.

    gpu-bound: the GPU's own work binds; cpu-contended: the host's CPU capacity binds;
    loader-bound: the ranks wait on busy DataLoader workers; then, by the largest gain on the rank
    path: inline (freed work on the rank thread), contention (run-queue relief), peer-wait (shorter
    waits on the collective and peers); worker-with-slack when the freed work is in loaders the
    ranks do not wait on; rank-path when nothing on the path shrinks. ``expected``: the expected
    case's ``_bounds`` (computed here when not given).
    """
    before, _, terms = expected if expected is not None else _bounds(job, "expected")
    path = max(before["rank"], before["loader"])
    d = max(job.window.length_s, 1e-9)
    if before["gpu"] >= SATURATED * max(path, before["capacity"]):
        return "gpu-bound", f"GPU busy {100 * (job.gpu_busy or 0):.0f} % of the window"
    if before["capacity"] >= SATURATED * path:
        return "cpu-contended", (f"host CPU busy {100 * job.host_busy_s / (job.cpu_count * d):.0f} % of capacity; "
                                 "freed CPU anywhere shortens the job")
    words = _words(job)
    if before["loader"] >= before["rank"] and job.loaders:
        return "loader-bound", f"{words['ranks wait']} on {words['their']} DataLoader workers, which are busy"
    gains = _gains(job, terms)
    name, gain = max(((k, v) for k, v in gains.items() if k != "loader"), key=lambda kv: kv[1])
    if gain >= SIGNIFICANT * d:
        why = {"inline": f"the freed work runs on {words['rank']} itself, on its critical path",
               "contention": f"{words['rank']} waits for a CPU, and the offload frees CPU it competes for",
               "peer": f"{words['rank']} waits on {words['peers']}, whose work the offload frees"}
        return {"inline": "inline", "contention": "contention", "peer": "peer-wait"}[name], why[name]
    if sum(ld.freed_s for ld in job.loaders) > 0:
        return "worker-with-slack", f"the freed work is in loader processes {words['ranks']} {words['do']} not wait on"
    return "rank-path", f"{words['rank']}'s own path binds; little of the freed work is on it"


def _words(job: JobPaths) -> dict:
    """How the regime's reason names the job's threads: ranks and their peers for a job of several
    ranks; for a single process (no ranks to speak of) its main thread and its own other threads,
    the only "peers" paths.py can find for it."""
    if len(job.ranks) > 1:
        return {"rank": "the rank thread", "ranks": "the ranks", "ranks wait": "the ranks wait", "do": "do",
                "their": "their", "peers": "the collective and its peers"}
    return {"rank": "the job's main thread", "ranks": "the job's main thread", "ranks wait": "the job's main thread waits",
            "do": "does", "their": "its", "peers": "its process's other threads"}


def evidence(job: JobPaths) -> dict:
    """The measured signals the regime rests on, as shares of the window (0..1) and seconds."""
    d = max(job.window.length_s, 1e-9)
    ranks = [{"pid": r.pid, "comm": r.comm, "on_cpu": round(r.on_cpu_s / d, 4), "runq": round(r.runq_s / d, 4),
              **{f"wait_{k}": round(v / d, 4) for k, v in r.wait_s.items()}, "freed_s": round(r.freed_s, 4)}
             for r in job.ranks]
    loaders = [{"pid": ld.pid, "rank_pid": ld.rank_pid, "busy": round(ld.busy_s / d, 4),
                "runq": round(ld.runq_s / d, 4), "freed_s": round(ld.freed_s, 4)} for ld in job.loaders]
    return {"window_s": round(d, 3), "host_idle": round(max(0.0, 1 - job.host_busy_s / (job.cpu_count * d)), 4),
            "host_freed_s": round(job.host_freed_s, 4), "gpu_busy": job.gpu_busy, "ranks": ranks, "loaders": loaders}


def speedup(job: JobPaths) -> dict:
    """low / expected / high speedup, the regime and its evidence (see the module docstring).

    Returns {low, expected, high, regime, regime_why, bounds: {case: {before: {...}, after: {...}}},
    evidence}; bound values are seconds of the window.
    """
    out, bounds, evaluated = {}, {}, {}
    for case in CASES:
        before, after, _ = evaluated[case] = _bounds(job, case)
        b, a = max(before.values()), max(after.values())
        out[case] = round(b / a, 6) if a > 1e-12 else None
        bounds[case] = {"before": {k: round(v, 4) for k, v in before.items()},
                        "after": {k: round(v, 4) for k, v in after.items()}}
    name, why = regime(job, evaluated["expected"])
    gains = {k: round(v, 4) for k, v in _gains(job, evaluated["expected"][2]).items()}
    return {**out, "regime": name, "regime_why": why, "bounds": bounds,
            "evidence": {**evidence(job), "path_gains_s": gains}}
