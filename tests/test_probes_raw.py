"""dpuprof.record.load.probes: choosing raw tracepoints (with BTF offsets) or the classic fallback."""

from __future__ import annotations

import pytest

from dpuprof.record.load import btf, probes

NET = next(p for p in probes.PROBES if p.name == "net_dev")
BLOCK = next(p for p in probes.PROBES if p.name == "block_io")


class _Bcc:
    raw = True

    @classmethod
    def support_raw_tracepoint(cls):
        return cls.raw


class _FakeBtf:
    OFFSETS = {"len": 112, "dev": 16, "name": 280, "q": 0, "cmd_flags": 24, "disk": 104, "major": 0,
               "first_minor": 4, "pid": 2464}
    SIZES = {"cmd_flags": 4, "major": 4, "first_minor": 4, "pid": 4}
    ENUMS = {"__REQ_FAILFAST_DEV": 8, "REQ_OP_READ": 0, "REQ_OP_WRITE": 1}

    def member(self, struct_name, member):
        return btf.Member(self.OFFSETS[member], self.SIZES.get(member, 8))

    def enumerator(self, name):
        if name not in self.ENUMS:
            raise btf.BtfError(f"no enumerator {name!r} in BTF")
        return self.ENUMS[name]


@pytest.fixture
def fake_btf(monkeypatch):
    monkeypatch.delenv(probes.NO_RAW_TP_ENV, raising=False)
    monkeypatch.setattr(probes, "_kernel_btf", lambda: _FakeBtf())


def test_raw_variant_gets_the_btf_offsets_as_defines(fake_btf):
    defines, why = probes.raw_defines(NET, _Bcc)
    assert why == ""
    assert defines.splitlines() == ["#define NET_DEV_RAW_TP 1", "#define NET_SKB_LEN_OFF 112",
                                    "#define NET_SKB_DEV_OFF 16", "#define NET_DEV_NAME_OFF 280"]
    assert probes._source(NET, defines).startswith(defines)  # ahead of the probe's own text


def test_hot_events_raw_version_needs_raw_tracepoints_only(fake_btf, monkeypatch):
    assert probes.hot_defines(_Bcc, "6.18.44-fc-v1045") == "#define HOT_RAW_TP 1\n"
    assert probes.hot_defines(_Bcc, "4.16.0") is None  # no raw tracepoints before 4.17
    monkeypatch.setenv(probes.NO_RAW_TP_ENV, "1")
    assert probes.hot_defines(_Bcc, "6.18.44") is None


def test_hot_events_source_defines_a_hook_per_probe_ahead_of_the_programs():
    wanted = [p for p in probes.PROBES if p.name in ("cpu_sample", "softirq")]
    text = probes.hot_source(wanted, "#define HOT_RAW_TP 1\n")
    assert text.startswith("#define HOOK_cpu_sample 1\n#define HOOK_softirq 1\n#define HOT_RAW_TP 1\n")
    assert "RAW_TRACEPOINT_PROBE(softirq_entry)" in text and "TRACEPOINT_PROBE(irq, softirq_entry)" in text
    assert "sched_switch" not in text.split("\n// Overhead", 1)[1]  # no program on a context switch
    # no probe file defines a program on a hot event: each has a hook for hot_events instead
    for probe in probes.PROBES:
        source = (probes.probe_dir() / probe.file).read_text()
        for event in probes.HOT_EVENT_NAMES:
            assert f"RAW_TRACEPOINT_PROBE({event})" not in source, probe.name
            assert f", {event})" not in source.replace("TRACEPOINT_PROBE(sched, sched_wakeup_new)", ""), probe.name


def test_block_io_raw_variant_gets_offsets_and_enumerators(fake_btf, monkeypatch):
    defines, why = probes.raw_defines(BLOCK, _Bcc)
    assert why == ""
    assert defines.splitlines() == [
        "#define BLOCK_IO_RAW_TP 1", "#define BLK_RQ_Q_OFF 0", "#define BLK_RQ_FLAGS_OFF 24",
        "#define BLK_Q_DISK_OFF 104", "#define BLK_DISK_MAJOR_OFF 0", "#define BLK_DISK_MINOR_OFF 4",
        "#define BLK_OP_BITS 8", "#define BLK_OP_READ 0", "#define BLK_OP_WRITE 1"]
    # A member of another width than the program reads, or a missing enumerator: classic version.
    monkeypatch.setitem(_FakeBtf.SIZES, "cmd_flags", 8)
    assert probes.raw_defines(BLOCK, _Bcc) == (None, "BTF: request.cmd_flags is 8 bytes, not 4")
    monkeypatch.setitem(_FakeBtf.SIZES, "cmd_flags", 4)
    monkeypatch.delitem(_FakeBtf.ENUMS, "__REQ_FAILFAST_DEV")
    assert probes.raw_defines(BLOCK, _Bcc) == (None, "BTF: no enumerator '__REQ_FAILFAST_DEV' in BTF")
    monkeypatch.setenv(probes.NO_RAW_TP_ENV, "1")
    assert probes.raw_defines(BLOCK, _Bcc) == (None, "DPUPROF_NO_RAW_TP is set")


def test_falls_back_without_btf_raw_tracepoints_or_when_told(fake_btf, monkeypatch):
    def no_btf():
        raise btf.BtfError("cannot read /sys/kernel/btf/vmlinux: No such file or directory")

    monkeypatch.setattr(probes, "_kernel_btf", no_btf)
    assert probes.raw_defines(NET, _Bcc) == (
        None, "BTF: cannot read /sys/kernel/btf/vmlinux: No such file or directory")
    assert probes.hot_defines(_Bcc, "6.18.44") == "#define HOT_RAW_TP 1\n"  # the vector alone: no BTF
    monkeypatch.setattr(probes, "_kernel_btf", lambda: _FakeBtf())
    monkeypatch.setattr(_Bcc, "raw", False)
    assert probes.raw_defines(NET, _Bcc) == (None, "this kernel has no raw tracepoints")
    monkeypatch.setattr(_Bcc, "raw", True)
    monkeypatch.setenv(probes.NO_RAW_TP_ENV, "1")
    assert probes.raw_defines(NET, _Bcc)[0] is None
    assert probes.raw_defines(next(p for p in probes.PROBES if p.name == "cpu_sample"), _Bcc)[0] is None


def test_hooks_reads_which_programs_were_loaded():
    class Bpf:
        programs = {"raw_tracepoint__softirq_entry": 1, "raw_tracepoint__softirq_exit": 2,
                    "tracepoint__net__net_dev_xmit": 3, "tracepoint__tcp__tcp_retransmit_skb": 4,
                    "raw_tracepoint__block_rq_issue": 6, "raw_tracepoint__block_rq_complete": 7,
                    "on_sample": 5}

    assert probes.hooks(Bpf) == {"softirq": "raw_tracepoint", "net_dev": "tracepoint",
                                 "block_io": "raw_tracepoint"}

    class WithSchedWait(Bpf):
        programs = {**Bpf.programs, "raw_tracepoint__sched_waking": 8}

    assert probes.hooks(WithSchedWait)["sched_wait"] == "raw_tracepoint"


def test_raw_tracepoint_support_is_the_kernel_version_checked_once(fake_btf):
    assert probes.kernel_has_raw_tracepoints("6.18.44-fc-v1045")
    assert probes.kernel_has_raw_tracepoints("4.17.0")
    assert not probes.kernel_has_raw_tracepoints("4.16.18-300.fc28.x86_64")
    assert not probes.kernel_has_raw_tracepoints("garbage")

    class Asked(_Bcc):
        calls = 0

        @classmethod
        def support_raw_tracepoint(cls):
            cls.calls += 1
            return True

    # The caller's answer is used as given: bcc (which reads all of /proc/kallsyms) is not asked.
    assert probes.raw_defines(NET, Asked, supported=False) == (None, "this kernel has no raw tracepoints")
    assert probes.raw_defines(NET, Asked, supported=True)[0].startswith("#define NET_DEV_RAW_TP 1\n")
    assert Asked.calls == 0


def test_only_read_only_compiler_mappings_without_private_pages_are_dropped():
    from dpuprof.record.load.bcc_loader import _droppable

    smaps = "\n".join([
        "7f0000000000-7f0000100000 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1",
        "Rss:                1024 kB", "Anonymous:             0 kB",
        "7f0000100000-7f0000200000 r--p 00100000 08:01 1 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1",
        "Rss:                 512 kB", "Anonymous:           128 kB",  # relocated (RELRO): kept
        "7f0000200000-7f0000300000 rw-p 00200000 08:01 1 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1",
        "Rss:                  64 kB", "Anonymous:             0 kB",  # writable: kept
        "7f0000300000-7f0000400000 r--p 00000000 08:01 2 /usr/lib/llvm-14/lib/libclang-cpp.so.14",
        "Rss:                 256 kB", "Anonymous:             0 kB",
        "7f0000400000-7f0000500000 r-xp 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/libc.so.6",
        "Rss:                 900 kB", "Anonymous:             0 kB",  # not the compiler: kept
    ])
    assert _droppable(smaps) == [(0x7f0000000000, 0x7f0000100000, 1024), (0x7f0000300000, 0x7f0000400000, 256)]
