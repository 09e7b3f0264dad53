"""Least privilege for ``dpuprof record`` (issue 12): capabilities, not uid 0.

Unit tests parse /proc/PID/status text and decide from masks. The root test really records as
nobody (uid 65534) holding only the capabilities given (``setpriv --ambient-caps``), with this
interpreter reachable through a bind mount in a private mount namespace (root's pyenv lives
under /root, which nobody cannot enter): without CAP_PERFMON the error line names it, and with
CAP_BPF + CAP_PERFMON + CAP_DAC_READ_SEARCH + CAP_SYSLOG a recording is made whose kernel frames
are named (bcc names none unless euid is 0: dpuprof/record/stacks/kallsyms.py), and the command it launched
holds no capability.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capsrun import NOBODY, as_nobody, nobody_dir  # noqa: F401 (a fixture)
from dpuprof.errors import UserError
from dpuprof.record.stacks import kallsyms
from dpuprof.record.workload import privilege
from dpuprof.record.workload.privilege import CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE

# /proc/self/status of root on this VM (all but CAP_SYS_RESOURCE, bit 24) and of a plain user.
ROOT_STATUS = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n"
USER_STATUS = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
BPF_PERFMON = (1 << CAP_BPF) | (1 << CAP_PERFMON)


def test_capeff_bits_parse():
    root = privilege.parse_capeff(ROOT_STATUS)
    assert root == 0x1fffeffffff and not privilege.has(root, 24)
    assert all(privilege.has(root, c) for c in (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, CAP_SYS_ADMIN))
    assert privilege.parse_capeff(USER_STATUS) == 0
    assert privilege.parse_capeff("CapEff:\t000000c000000000\n") == BPF_PERFMON
    assert privilege.names(BPF_PERFMON | 1 << CAP_SYS_PTRACE) == ["CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE"]
    with pytest.raises(ValueError):
        privilege.parse_capeff("Name:\tcat\n")


def test_this_process_mask_matches_its_status_file():
    text = Path("/proc/self/status").read_text()
    assert privilege.effective() == privilege.parse_capeff(text)


def test_bpf_verdict_names_the_missing_capability():
    assert privilege.bpf_verdict(BPF_PERFMON).ok
    assert privilege.bpf_verdict(1 << CAP_SYS_ADMIN).ok  # the pre-5.8 way still works
    v = privilege.bpf_verdict(1 << CAP_BPF)
    assert not v.ok and v.missing == ("CAP_PERFMON",)
    assert privilege.bpf_verdict(0).missing == ("CAP_BPF", "CAP_PERFMON")
    old = privilege.bpf_verdict(BPF_PERFMON, kernel_last_cap=37)  # Linux < 5.8 knows no CAP_BPF
    assert not old.ok and old.missing == ("CAP_SYS_ADMIN",)


def test_tracefs_and_kallsyms_verdicts():
    assert privilege.tracefs_verdict(None).ok
    v = privilege.tracefs_verdict("/sys/kernel/tracing")
    assert not v.ok and v.missing == ("CAP_DAC_READ_SEARCH",) and "/sys/kernel/tracing" in v.why
    assert privilege.kallsyms_verdict(True).ok
    assert privilege.kallsyms_verdict(False).missing == ("CAP_SYSLOG",)


def test_unreadable_tracefs_tries_for_real(tmp_path):
    (tmp_path / "ok" / "events").mkdir(parents=True)
    assert privilege.unreadable_tracefs([str(tmp_path / "ok")]) is None
    assert privilege.unreadable_tracefs([str(tmp_path / "gone")]) == str(tmp_path / "gone")
    assert privilege.unreadable_tracefs([str(tmp_path / "gone"), str(tmp_path / "ok")]) is None
    assert privilege.unreadable_tracefs([]) is None  # not mounted: probes.py says what is missing


def test_kernel_symbols_from_a_kallsyms_text(tmp_path):
    f = tmp_path / "kallsyms"
    f.write_text("ffffffff81000000 T _stext\nffffffff81000100 t helper\nffffffff82000000 D some_data\n"
                 "ffffffffc0000000 t mod_fn\t[veth]\n")
    syms = kallsyms.KernelSymbols(str(f))
    assert len(syms) == 3  # the data symbol is left out
    assert syms.name(0xffffffff81000050) == "_stext" and syms.name(0xffffffff81000100) == "helper"
    assert syms.name(0xffffffffc0000010) == "mod_fn" and syms.name(0x1000) == "[unknown]"
    assert kallsyms.addresses_visible(str(f))
    (tmp_path / "zeros").write_text("0000000000000000 T _stext\n0000000000000000 t helper\n")
    assert not kallsyms.addresses_visible(str(tmp_path / "zeros"))
    assert len(kallsyms.KernelSymbols(str(tmp_path / "zeros"))) == 0


def test_require_passes_for_root_and_names_caps_otherwise(monkeypatch):
    if os.geteuid() == 0:
        privilege.require_for_bpf()  # root with its usual capabilities: no error
    monkeypatch.setattr(privilege, "effective", lambda: 1 << CAP_BPF)
    with pytest.raises(UserError) as err:
        privilege.require_for_bpf()
    line = str(err.value)
    assert "needs root, or CAP_PERFMON:" in line and "has CAP_BPF" in line and "\n" not in line


# ---------------------------------------------------------------- a real run as nobody

@pytest.mark.root
def test_record_as_nobody_names_the_missing_capability(nobody_dir):
    res = as_nobody("+bpf", ["-m", "dpuprof", "record", "-q", "-o", "x.rec", "--", "true"], nobody_dir)
    print(res.stderr)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs root, or CAP_PERFMON:" in lines[0] and "uid 65534" in lines[0], lines
    assert not (nobody_dir / "x.rec").exists()


@pytest.mark.root
@pytest.mark.slow
def test_record_as_nobody_with_capabilities_only(nobody_dir):
    from dpuprof.recording import load

    caps = "+bpf,+perfmon,+dac_read_search,+syslog"
    workload = "grep ^Cap /proc/self/status > caps.txt; dd if=/dev/zero bs=1M count=300 2>/dev/null | cat > /dev/null"
    res = as_nobody(caps, ["-m", "dpuprof", "record", "-q", "-o", "nobody.rec", "--", "sh", "-c", workload],
                     nobody_dir)
    print(res.stderr)
    assert res.returncode == 0, res.stderr
    # The recorder held the capabilities; the command it launched holds none (ambient set cleared).
    held = dict(line.split(":\t") for line in (nobody_dir / "caps.txt").read_text().splitlines())
    assert all(int(held[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")), held
    out = nobody_dir / "nobody.rec"
    assert os.stat(out).st_uid == NOBODY
    rec = load(out)
    assert rec.complete and {"proc_tree", "cpu_sample", "sched_wait"} <= set(rec.meta["probes_used"])
    assert set(rec.info.io_sources) == {"net_io", "block_io", "sock_io"}  # the counters need no capability
    procs = rec.table("processes")
    mine = set(procs.loc[procs["in_workload"] == 1, "pid"])
    stacks = rec.table("stacks")
    samples = rec.table("stack_samples")
    folded = stacks[stacks["stack_id"].isin(samples.loc[samples["pid"].isin(mine), "stack_id"])]["folded"]
    assert len(folded) > 0
    # dd and cat spend their time in read/write system calls: named kernel frames, not [unknown].
    assert folded.str.contains(r"vfs_(read|write)_\[k\]", regex=True).any(), folded.tolist()[:5]
    assert not folded.str.contains(r"\[unknown\]_\[k\]", regex=True).any(), folded.tolist()[:5]
