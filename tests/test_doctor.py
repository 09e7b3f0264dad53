"""``dpuprof doctor`` says what it found: root-only is not "missing", fallback headers are not "ok".

The unprivileged checks run in a forked child that drops to nobody (setresuid 65534): nobody
cannot execute root's own interpreter (pyenv under /root), so the child runs this interpreter's
already-loaded dpuprof with nobody's real permissions on tracefs and /proc.
"""

from __future__ import annotations

import json
import os
import platform
import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsrun import as_nobody as as_nobody_with, nobody_dir  # noqa: F401 (a fixture)
from dpuprof.cli import cli
from dpuprof.record import doctor
from dpuprof.record.workload.privilege import CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE, REPORTED

NOBODY = 65534


def _doctor_output(*args) -> dict:
    # dpuprof.cli is imported above, as root: nobody cannot read a Python installed under /root
    # (pyenv), so the forked child must import nothing new
    res = CliRunner().invoke(cli, ["doctor", *args])
    return {"exit_code": res.exit_code, "stdout": res.stdout}


def as_nobody(fn, *args) -> dict:
    """``fn(*args)`` (JSON-able) run as uid/gid 65534 with no groups; directly when not root."""
    if os.geteuid() != 0:
        return fn(*args)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges for good, run, report through the pipe, never return
        code = 1
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            os.chdir("/")
            payload = json.dumps({"result": fn(*args)})
            code = 0
        except BaseException:  # noqa: BLE001 -- everything goes back to the parent as text
            payload = json.dumps({"error": traceback.format_exc()})
        with os.fdopen(w, "w") as out:
            out.write(payload)
        os._exit(code)
    os.close(w)
    with os.fdopen(r) as inp:
        data = json.loads(inp.read())
    os.waitpid(pid, 0)
    assert "error" not in data, data.get("error")
    return data["result"]


def _tracefs_mounted() -> bool:
    with open("/proc/self/mounts") as fh:
        return any(len(f) > 2 and f[2] == "tracefs" for f in (line.split() for line in fh))


def test_unprivileged_doctor_says_not_readable_not_missing():
    out = as_nobody(_doctor_output, "--format", "json")
    data = json.loads(out["stdout"])
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["root"]["ok"] is False and out["exit_code"] == 1
    tfs = checks["tracefs"]
    if not _tracefs_mounted():
        pytest.skip("tracefs is not mounted here, so 'not mounted' is the truth")
    if tfs["ok"]:
        pytest.skip("tracefs is readable by everyone on this machine")
    assert tfs["status"] == "unreadable" and "not readable by this user" in tfs["detail"], tfs
    assert "CAP_DAC_READ_SEARCH" in tfs["detail"] and "CAP_DAC_READ_SEARCH" in tfs["fix"]
    assert "not mounted" not in tfs["detail"]
    tracepoints = [c for c in data["checks"] if c["name"].startswith("tracepoint ")]
    assert tracepoints
    # Without root they are looked up in /proc/kallsyms: present ones say so, none is "missing"
    # only because tracefs could not be read.
    for c in tracepoints:
        assert c["status"] in ("unreadable", "missing"), c
        if c["status"] == "missing":
            assert "not in /proc/kallsyms" in c["detail"], c
    assert any("kallsyms" in c["detail"] or "not readable by this user" in c["detail"] for c in tracepoints)
    # ... and the terminal output says "unreadable", never MISSING, for them.
    text = as_nobody(_doctor_output)["stdout"]
    tracefs_line = next(line for line in text.splitlines() if line.startswith("tracefs"))
    assert "unreadable" in tracefs_line and "MISSING" not in tracefs_line


@pytest.mark.skipif(os.geteuid() != 0, reason="as root: the check sees the headers bcc will use")
def test_root_doctor_names_fallback_headers_for_another_kernel_series():
    build = Path(f"/lib/modules/{platform.release()}/build")
    made_for = doctor.headers_release(build)
    if made_for is None:
        pytest.skip(f"no headers with a release at {build}")
    data = json.loads(_doctor_output("--format", "json")["stdout"])
    check = next(c for c in data["checks"] if c["name"] == "kernel headers")
    same = made_for.split(".")[:2] == platform.release().split(".")[:2]
    assert check["status"] == ("ok" if same else "fallback"), (check, made_for)
    if not same:
        assert check["detail"].startswith("fallback headers (")
        assert "tracepoint and perf_event programs work; struct-reading programs may not" in check["detail"]


def _fake_headers(tmp_path: Path, release: str) -> Path:
    gen = tmp_path / "build" / "include" / "generated"
    gen.mkdir(parents=True)
    (gen / "utsrelease.h").write_text(f'#define UTS_RELEASE "{release}"\n')
    return tmp_path / "build"


def test_headers_of_another_series_are_fallback(tmp_path):
    check = doctor.headers_check(kernel="6.18.44-fc-v1045", build=_fake_headers(tmp_path, "6.1.0-57-amd64"))
    assert check["ok"] and check["status"] == "fallback"
    assert check["detail"].startswith("fallback headers (6.1 for 6.18): tracepoint and perf_event programs "
                                      "work; struct-reading programs may not")


def test_headers_of_the_same_series_are_ok(tmp_path):
    check = doctor.headers_check(kernel="6.1.0-57-amd64", build=_fake_headers(tmp_path, "6.1.0-57-amd64"))
    assert check["ok"] and check["status"] == "ok" and "fallback" not in check["detail"]


def test_missing_headers_are_missing(tmp_path):
    check = doctor.headers_check(kernel="6.18.1", build=tmp_path / "none")
    assert not check["ok"] and check["status"] == "missing" and check["fix"]


# ---------------------------------------------------------------- capabilities, not uid 0

CAP_NAMES = ("CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE", "CAP_SYS_ADMIN")


def _by_name(checks) -> dict:
    return {c["name"]: c for c in checks}


def test_capability_lines_say_held_and_what_each_enables():
    checks = _by_name(doctor.capability_checks(mask=(1 << CAP_BPF) | (1 << CAP_SYS_PTRACE)))
    assert len([n for n in checks if n.startswith("capability ")]) == len(REPORTED)
    for name in CAP_NAMES:
        c = checks[f"capability {name}"]
        assert not c["required"] and c["detail"].split(":", 1)[1].strip()  # what it enables
    assert checks["capability CAP_BPF"]["ok"] and checks["capability CAP_BPF"]["detail"].startswith("held:")
    assert checks["capability CAP_PERFMON"]["status"] == "not held"
    assert checks["capability CAP_PERFMON"]["detail"].startswith("not held:")
    bpf = checks["eBPF privileges"]
    assert bpf["required"] and not bpf["ok"] and "needs CAP_PERFMON" in bpf["detail"]
    assert "holds CAP_BPF, CAP_SYS_PTRACE" in bpf["detail"] and "CAP_PERFMON" in bpf["fix"]


def test_bpf_and_perfmon_or_sys_admin_are_enough():
    for mask in ((1 << CAP_BPF) | (1 << CAP_PERFMON), 1 << CAP_SYS_ADMIN):
        assert _by_name(doctor.capability_checks(mask=mask))["eBPF privileges"]["ok"]
    old = _by_name(doctor.capability_checks(mask=(1 << CAP_BPF) | (1 << CAP_PERFMON), kernel_last_cap=37))
    assert not old["eBPF privileges"]["ok"] and "CAP_SYS_ADMIN" in old["eBPF privileges"]["detail"]
    assert old["capability CAP_BPF"]["detail"].startswith("held") is True  # the bit, whatever the kernel


def test_unprivileged_doctor_json_reports_no_capabilities_honestly():
    out = as_nobody(_doctor_output, "--format", "json")
    data = json.loads(out["stdout"])
    priv = data["privileges"]
    assert priv["uid"] == (NOBODY if os.geteuid() == 0 else os.geteuid()) and priv["root"] is False
    if os.geteuid() == 0:  # dropped to nobody: setresuid clears every capability
        assert priv["cap_eff"] == "0" * 16
        assert not any(v["held"] for v in priv["capabilities"].values())
        checks = _by_name(data["checks"])
        assert not checks["eBPF privileges"]["ok"] and out["exit_code"] == 1
        assert "needs CAP_BPF and CAP_PERFMON" in checks["eBPF privileges"]["detail"]
        assert checks["root"]["required"] is False  # uid 0 itself is not what record needs
    assert set(CAP_NAMES) <= set(priv["capabilities"])
    assert all(v["enables"] for v in priv["capabilities"].values())


def test_privileges_are_this_process_capeff():
    priv = doctor.privileges()
    mask = int(Path("/proc/self/status").read_text().split("CapEff:")[1].split()[0], 16)
    assert int(priv["cap_eff"], 16) == mask and priv["uid"] == os.geteuid()
    for name, bit in zip(CAP_NAMES, (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, CAP_SYS_ADMIN)):
        assert priv["capabilities"][name]["held"] is bool(mask >> bit & 1), name


@pytest.mark.root
@pytest.mark.slow  # 14-19 s: doctor compiles and attaches its test programs
def test_doctor_as_nobody_with_capabilities_only_is_ready(nobody_dir):
    caps = "+bpf,+perfmon,+dac_read_search,+syslog"
    res = as_nobody_with(caps, ["-m", "dpuprof", "doctor", "--format", "json"], nobody_dir)
    data = json.loads(res.stdout)
    checks = _by_name(data["checks"])
    print({k: (c["status"], c["detail"][:80]) for k, c in checks.items() if not k.startswith("tracepoint")})
    assert data["privileges"]["uid"] == NOBODY and not data["privileges"]["root"]
    held = {k for k, v in data["privileges"]["capabilities"].items() if v["held"]}
    assert held == {"CAP_BPF", "CAP_PERFMON", "CAP_DAC_READ_SEARCH", "CAP_SYSLOG"}
    assert checks["eBPF privileges"]["ok"] and checks["kernel symbols"]["ok"] and checks["tracefs"]["ok"]
    # doctor really compiled and attached the sampler with these capabilities alone.
    assert checks["perf_event cpu-clock sampling"]["ok"], checks["perf_event cpu-clock sampling"]
    assert res.returncode == 0 and data["ok"]


# ---------------------------------------------------------------- what the lines say, and how they line up

def test_bcc_messages_read_as_text_and_eperm_is_the_kernels_policy():
    err = Exception("Failed to attach BPF program b'probe' to kprobe b'vfs_read', it's not traceable")
    assert doctor.bcc_error(err, "x") == "Failed to attach BPF program probe to kprobe vfs_read, it's not traceable"
    # bcc says this for any EPERM; the loading checks run only with the eBPF privileges held
    eperm = doctor.bcc_error(Exception("Need super-user privileges to run"), "x")
    assert "super-user" not in eperm and "EPERM" in eperm and "holds the eBPF privileges" in eperm
    assert doctor.bcc_error(Exception(""), "load failed") == "load failed"  # no IndexError on an empty one


def test_a_tracepoint_several_probes_use_is_one_line():
    checks = doctor.tracepoint_checks(tracefs_readable=False)
    names = [c["name"] for c in checks]
    assert len(names) == len(set(names))
    used = [(tp, p.name) for p in doctor.probemod.PROBES for tp in p.tracepoints]
    shared = {tp for tp, _ in used if sum(t == tp for t, _ in used) > 1}
    if not shared:
        pytest.skip("no tracepoint serves two probes any more")
    for c in checks:
        tp = c["name"].split(" ", 1)[1]
        probes = [name for t, name in used if t == tp]
        assert f"used by probe{'s' if len(probes) > 1 else ''} {', '.join(probes)}" in c["detail"]
        assert c["required"] is any(p in doctor.probemod.REQUIRED for p in probes)


def test_terminal_columns_line_up_for_the_longest_name():
    from dpuprof.cli.doctor import table

    checks = [doctor._check("root", True, "running as root"),
              doctor._check("tracepoint timer:hrtimer_expire_entry", True, "used by probe sched_wait"),
              doctor._check("kprobe", False, "not traceable", "optional; CONFIG_KPROBES=y", required=False)]
    lines = table(checks)
    assert len(lines) == 4 and lines[3].strip() == "fix: optional; CONFIG_KPROBES=y"
    rows = lines[:3]
    status_at = {row.index(word) for row, word in zip(rows, ("ok", "ok", "missing (optional)"))}
    detail_at = {row.index(d) for row, d in zip(rows, ("running", "used by", "not traceable"))}
    assert len(status_at) == 1 and len(detail_at) == 1, rows
    assert lines[3].index("fix:") == status_at.pop()
