"""The probe registry: which BPF programs exist, what each needs, and loading them with bcc.

Each probe is one file in ``probes/`` (shipped in the wheel as ``dpuprof/_probes``). Probes whose
tracepoints are missing on this kernel are skipped and reported as unavailable with the reason;
the rest compile together in one bcc invocation (about 1 s), falling back to one at a time when the
combined program fails, so one bad probe never costs the others.

Hooks: softirq and net_dev attach to raw tracepoints where the kernel has them (and, for net_dev,
where BTF gives the running kernel's struct offsets): classic tracepoint programs are skipped while
any other BPF program runs on that CPU (the kernel's bpf_prog_active recursion guard; each skip is
a ``missed_<program>`` in the recording's ``lost`` table), raw tracepoint programs only when they
would recurse into themselves. Without raw tracepoints or BTF they use the classic tracepoints; the
recording's metadata ``probe_hooks`` says which ran (``hooks``).

Test knobs: ``DPUPROF_NO_RAW_TP=1`` forces the classic tracepoints (to compare the two).
``DPUPROF_MAP_ENTRIES=counts=8,stacks0=4`` overrides the ``max_entries`` of the named
hash and stack-trace maps, so tests can make maps overflow and check that the loss is counted.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

TRACEFS_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


@dataclass(frozen=True)
class RawVariant:
    """How a probe's raw-tracepoint version is compiled: ``define`` selects it in the C file, and
    each (constant, struct, member) of ``btf`` becomes ``#define constant <byte offset>``."""
    define: str
    btf: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Probe:
    name: str
    file: str
    tracepoints: tuple[str, ...] = ()
    perf_event: bool = False
    raw: RawVariant | None = None


PROBES = (
    Probe("proc_tree", "proc_tree.bpf.c", ("sched:sched_process_fork",)),
    Probe("cpu_sample", "cpu_sample.bpf.c", ("sched:sched_switch",), perf_event=True),
    Probe("softirq", "softirq.bpf.c", ("irq:softirq_entry", "irq:softirq_exit"),
          raw=RawVariant("SOFTIRQ_RAW_TP")),
    Probe("block_io", "block_io.bpf.c", ("block:block_rq_issue", "block:block_rq_complete")),
    Probe("net_dev", "net_dev.bpf.c", ("net:net_dev_xmit", "net:netif_receive_skb", "tcp:tcp_retransmit_skb"),
          raw=RawVariant("NET_DEV_RAW_TP", (("NET_SKB_LEN_OFF", "sk_buff", "len"),
                                            ("NET_SKB_DEV_OFF", "sk_buff", "dev"),
                                            ("NET_DEV_NAME_OFF", "net_device", "name")))),
    Probe("sock_io", "sock_io.bpf.c", ("sock:sock_send_length", "sock:sock_recv_length")),
    Probe("uprobes", "uprobes.bpf.c", ("task:task_newtask", "syscalls:sys_enter_getpgid")),  # record/uprobes.py
)
PROBE_NAMES = tuple(p.name for p in PROBES)
REQUIRED = ("proc_tree", "cpu_sample")  # without these there is no workload or category split


def probe_dir() -> Path:
    """Where the BPF C files are: inside the installed wheel, or ``probes/`` of a source tree."""
    packaged = resources.files("dpuprof").joinpath("_probes")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "probes"


def tracefs() -> Path | None:
    """The tracefs mount (mounting it when missing and root); None when unreachable."""
    for cand in TRACEFS_CANDIDATES:
        if os.path.isdir(os.path.join(cand, "events")):
            return Path(cand)
    if os.geteuid() == 0 and os.path.isdir(TRACEFS_CANDIDATES[0]):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS_CANDIDATES[0]],
                       capture_output=True, check=False)
        if os.path.isdir(os.path.join(TRACEFS_CANDIDATES[0], "events")):
            return Path(TRACEFS_CANDIDATES[0])
    return None


def tracepoint_exists(tp: str) -> bool:
    root = tracefs()
    category, name = tp.split(":", 1)
    return root is not None and (root / "events" / category / name / "format").exists()


def missing_tracepoints(probe: Probe) -> list[str]:
    return [tp for tp in probe.tracepoints if not tracepoint_exists(tp)]


MAP_ENTRIES_ENV = "DPUPROF_MAP_ENTRIES"
_SIZED_MAP = r"(BPF_(?:HASH|LRU_HASH|PERCPU_HASH|STACK_TRACE)\(\s*{name}\s*,[^;]*?)(\d+)(\s*\)\s*;)"


def map_entries_override() -> dict[str, int]:
    """{map name: max_entries} from ``DPUPROF_MAP_ENTRIES`` (a test knob; empty when unset)."""
    from dpuprof.errors import UserError

    spec = os.environ.get(MAP_ENTRIES_ENV, "").strip()
    out = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, size = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_]\w*", name.strip()) or not size.strip().isdigit() or int(size) < 1:
            raise UserError(f"{MAP_ENTRIES_ENV}: expected NAME=ENTRIES[,NAME=ENTRIES...], got {item!r}")
        out[name.strip()] = int(size)
    return out


NO_RAW_TP_ENV = "DPUPROF_NO_RAW_TP"


@lru_cache(maxsize=1)
def _kernel_btf():
    from dpuprof.record.btf import Btf
    return Btf.load()


def raw_defines(probe: Probe, bpf_cls) -> tuple[str | None, str]:
    """(``#define`` lines selecting ``probe``'s raw-tracepoint version, "") when it can be used
    here; (None, why not) otherwise, and always for a probe without one."""
    from dpuprof.record.btf import BtfError

    if probe.raw is None:
        return None, "no raw-tracepoint version"
    if os.environ.get(NO_RAW_TP_ENV, "") not in ("", "0"):
        return None, f"{NO_RAW_TP_ENV} is set"
    support = getattr(bpf_cls, "support_raw_tracepoint", None)
    if support is not None and not support():
        return None, "this kernel has no raw tracepoints"
    lines = [f"#define {probe.raw.define} 1"]
    try:
        for const, struct_name, member in probe.raw.btf:
            lines.append(f"#define {const} {_kernel_btf().member(struct_name, member).offset}")
    except BtfError as err:
        return None, f"BTF: {err}"
    return "\n".join(lines) + "\n", ""


def _source(probe: Probe, defines: str | None = None) -> str:
    text = (probe_dir() / probe.file).read_text()
    for name, size in map_entries_override().items():
        text = re.sub(_SIZED_MAP.format(name=re.escape(name)), lambda m: f"{m[1]}{size}{m[3]}", text)
    return (defines or "") + text


def hooks(bpf) -> dict[str, str]:
    """{probe name: "raw_tracepoint" or "tracepoint"} for the loaded probes that have both
    versions, read from the programs bcc attached."""
    funcs = {f.decode() if isinstance(f, bytes) else f for f in getattr(bpf, "funcs", {})}
    out = {}
    for probe in PROBES:
        if probe.raw is None:
            continue
        events = [tp.split(":", 1)[1] for tp in probe.tracepoints]
        if any(f"raw_tracepoint__{e}" in funcs for e in events):
            out[probe.name] = "raw_tracepoint"
        elif any(f.startswith("tracepoint__") and f.split("__")[-1] in events for f in funcs):
            out[probe.name] = "tracepoint"
    return out


CFLAGS = ["-w"]  # bcc's headers vs. a newer kernel produce harmless macro warnings


def load(bpf_cls, wanted: list[str]) -> tuple[object | None, list[str], dict[str, str]]:
    """Compile and attach the ``wanted`` probes. Returns (bpf, used names, {unavailable: reason}).

    perf_event attachment (cpu_sample) is done by the caller, which knows the frequency.
    """
    map_entries_override()  # a malformed DPUPROF_MAP_ENTRIES fails here, not as a probe's compile error
    unavailable: dict[str, str] = {}
    candidates = []
    for probe in PROBES:
        if probe.name not in wanted:
            continue
        missing = missing_tracepoints(probe)
        if missing:
            unavailable[probe.name] = "tracepoint missing on this kernel: " + ", ".join(missing)
        else:
            candidates.append(probe)
    if not candidates:
        return None, [], unavailable
    variants = {p.name: raw_defines(p, bpf_cls)[0] for p in candidates}
    try:
        bpf = bpf_cls(text="\n".join(_source(p, variants[p.name]) for p in candidates), cflags=CFLAGS)
        return bpf, [p.name for p in candidates], unavailable
    except Exception:  # bcc raises a bare Exception on compile/load failure
        pass
    # Find the culprit(s) one by one (a raw-tracepoint version that fails falls back to the
    # classic one), then load the survivors together.
    good = []
    for probe in candidates:
        for defines in dict.fromkeys((variants[probe.name], None)):
            try:
                trial = bpf_cls(text=_source(probe, defines), cflags=CFLAGS)
                trial.cleanup()
                variants[probe.name] = defines
                good.append(probe)
                break
            except Exception as err:
                unavailable[probe.name] = f"failed to compile or load: {str(err).splitlines()[0][:200]}"
        if probe in good:
            unavailable.pop(probe.name, None)
    if not good:
        return None, [], unavailable
    bpf = bpf_cls(text="\n".join(_source(p, variants[p.name]) for p in good), cflags=CFLAGS)
    return bpf, [p.name for p in good], unavailable
