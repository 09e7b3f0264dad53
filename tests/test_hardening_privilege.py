"""Hardening, privilege and safety (issue 7): under sudo the workload runs as the invoking user (uid,
gid, supplementary groups, HOME, no capabilities) and the recording is theirs and not
world-writable; output is never written through a symlink planted at the output path (record,
project, report); nothing from a recording is ever unpickled or evaluated.

(test_record_root.py already checks uid/gid from ``id`` and --as-root; here the kernel's view in
/proc/self/status is checked, with a user who has supplementary groups where one exists.)
"""

from __future__ import annotations

import ast
import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import PYTHON, REPO, dpuprof, summary_of
from dpuprof.recording import load
from factory import make_recording


# ---------------------------------------------------------------- the workload's identity under sudo

def _user_with_supplementary_groups() -> pwd.struct_passwd:
    """A local user who belongs to a group besides their own (postgres -> ssl-cert, say); nobody
    where no such user exists."""
    for g in grp.getgrall():
        for name in g.gr_mem:
            try:
                pw = pwd.getpwnam(name)
            except KeyError:
                continue
            if pw.pw_uid != 0 and g.gr_gid != pw.pw_gid:
                return pw
    return pwd.getpwnam("nobody")


# A shell, not Python: the user cannot run root's own interpreter (pyenv under /root).
IDENTITY = 'cat /proc/$$/status > "$1.status"; env > "$1.env"'


def _identity(base: Path) -> dict:
    status = dict(line.split(":", 1) for line in Path(f"{base}.status").read_text().splitlines() if ":" in line)
    env = dict(line.split("=", 1) for line in Path(f"{base}.env").read_text().splitlines() if "=" in line)
    return {"uid": status["Uid"].split(), "gid": status["Gid"].split(), "groups": status["Groups"].split(),
            "cap_eff": status["CapEff"].strip(), "cap_prm": status["CapPrm"].strip(),
            "env": {k: env.get(k) for k in ("HOME", "USER", "LOGNAME", "SUDO_UID", "SUDO_GID", "SUDO_USER",
                                            "SUDO_COMMAND")}}


@pytest.mark.root
def test_workload_runs_as_the_invoking_user_with_their_groups_only():
    pw = _user_with_supplementary_groups()
    groups = sorted(set(os.getgrouplist(pw.pw_name, pw.pw_gid)))
    work = Path(tempfile.mkdtemp(prefix="dpuprof-sudo-", dir="/tmp"))
    os.chmod(work, 0o777)
    try:
        _check_identity(pw, groups, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_identity(pw, groups, work: Path) -> None:
    ids, out = work / "ids", work / "run.rec"
    env = dict(os.environ, SUDO_UID=str(pw.pw_uid), SUDO_GID=str(pw.pw_gid), SUDO_USER=pw.pw_name,
               SUDO_COMMAND="/usr/bin/dpuprof record")
    res = subprocess.run([PYTHON, "-m", "dpuprof", "record", "-q", "-o", str(out), "--", "sh", "-c", IDENTITY, "sh",
                          str(ids)], env=env, capture_output=True, text=True, timeout=120, umask=0)
    assert res.returncode == 0, res.stderr
    got = _identity(ids)
    print(f"as {pw.pw_name}: {got}")
    assert got["uid"] == [str(pw.pw_uid)] * 4       # real, effective, saved, filesystem
    assert got["gid"] == [str(pw.pw_gid)] * 4
    assert sorted(int(g) for g in got["groups"]) == groups and (0 not in groups or pw.pw_gid == 0)
    assert int(got["cap_eff"], 16) == 0 and int(got["cap_prm"], 16) == 0
    assert got["env"]["HOME"] == pw.pw_dir and got["env"]["USER"] == pw.pw_name == got["env"]["LOGNAME"]
    assert not any(got["env"][k] for k in ("SUDO_UID", "SUDO_GID", "SUDO_USER", "SUDO_COMMAND"))
    # The recording is the invoking user's, and even with umask 0 not world- or group-writable.
    st = os.stat(out)
    assert (st.st_uid, st.st_gid) == (pw.pw_uid, pw.pw_gid)
    assert stat.S_IMODE(st.st_mode) == 0o644
    assert summary_of(out)["complete"]
    assert load(out).meta["user"] == pw.pw_name


# ---------------------------------------------------------------- symlinks planted at the output

def _victim(tmp_path) -> Path:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    return victim


def _untouched(victim: Path) -> None:
    assert victim.read_text() == "precious"
    assert not victim.is_symlink()


def _record_psutil(out, *extra):
    # psutil mode writes through the same RecordingWriter and needs neither bcc nor a compile.
    return dpuprof("record", "-q", "--probes", "psutil", *extra, "-o", out, "--", "true", timeout=60)


def test_record_refuses_symlink_at_old_name(tmp_path):
    victim = _victim(tmp_path)
    out = tmp_path / "run.rec"
    assert _record_psutil(out).returncode == 0
    (tmp_path / "run.rec.old").symlink_to(victim)  # the existing file would be renamed onto it
    res = _record_psutil(out)
    assert res.returncode == 2 and "symbolic link" in res.stderr and len(res.stderr.splitlines()) == 1
    _untouched(victim)
    assert load(out).complete  # the previous recording is still there


def test_record_dangling_symlink_is_refused_not_created(tmp_path):
    target = tmp_path / "created-through-link"
    out = tmp_path / "run.rec"
    out.symlink_to(target)
    res = _record_psutil(out)
    assert res.returncode == 2 and "symbolic link" in res.stderr
    assert not target.exists()


def test_record_symlink_at_journal_is_never_followed(tmp_path):
    victim = _victim(tmp_path)
    out = tmp_path / "run.rec"
    (tmp_path / "run.rec-journal").symlink_to(victim)
    res = _record_psutil(out)
    # SQLite refuses to open a journal through a symlink (or removes a planted one as stale);
    # either way the victim is untouched, and any error is one line.
    assert "Traceback" not in res.stderr
    assert res.returncode in (0, 2), res.stderr
    _untouched(victim)
    if out.exists():
        load(out)


def test_report_refuses_symlink_at_output(tmp_path):
    rec = tmp_path / "run.rec"
    _write_small(rec)
    victim = _victim(tmp_path)
    for name in ("r.json", "r.html", "r.md"):
        link = tmp_path / name
        link.symlink_to(victim)
        res = dpuprof("report", rec, "-o", link)
        assert res.returncode == 2 and "symbolic link" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        _untouched(victim)
        assert link.is_symlink()


def test_project_never_writes_through_a_symlink(tmp_path):
    rec = tmp_path / "run.rec"
    _write_small(rec)
    victim = _victim(tmp_path)
    # -o PATH, and the default ./RUN.proj.json in the current directory (tmp_path here).
    for link in (tmp_path / "p.json", tmp_path / "run.proj.json"):
        link.symlink_to(victim)
        args = ("project", rec, "--format", "json") + (("-o", link) if link.name == "p.json" else ())
        res = dpuprof(*args, cwd=tmp_path)
        assert "Traceback" not in res.stderr, res.stderr
        _untouched(victim)
        if res.returncode == 0:
            # Written by a rename over the link: the link is replaced, its target never opened.
            assert not link.is_symlink() and json.loads(link.read_text())["dpu"]
        else:
            assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


def _write_small(path):
    meta = {"cpu_count": 2, "mode": "bpf", "category_split": True, "sample_freq_hz": 99,
            "command": ["python3", "x.py"], "dpuprof_version": "test"}
    make_recording(path, meta=meta, t0=1000.0, interval_s=10.0,
                   cpu=[(100, "network", "network.tcpip", 100, 1.0), (100, "compute", "compute.other", 300, 3.0),
                        (0, "idle", "idle", 1000, 10.0)],
                   tables={"net_io": [("lo", "tx", 1e9, 30000)], "sock_io": [(100, "tcp", "send", 1e9, 500)]},
                   processes=[(100, 1, "python3", "python3 x.py", 1, 1000.0, 1010.0)],
                   final={"end_time": 1010.0, "exit_code": 0})


# ---------------------------------------------------------------- nothing evaluated or unpickled

FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle",
                     "yaml", "joblib"}
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "execfile", "input"}
FORBIDDEN_ATTRS = {"read_pickle", "to_pickle", "loads_pickle"}
DYNAMIC_ATTRS = {"eval", "query", "import_module"}  # fine with a literal argument only
# The one reviewed exception: the renderer module name comes from dpuprof's own fixed table of
# renderers (chosen by --format), never from a recording.
ALLOWED = {("dpuprof/render/registry.py", "import_module")}
# Reviewed: charts and their PNGs cross a pipe between the report and its own forked workers,
# never a file, a socket or anything a recording or projection holds.
ALLOWED_IMPORTS = {("dpuprof/render/chartpool.py", "pickle")}


def _findings(path: Path) -> list[str]:
    rel = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
    tree = ast.parse(path.read_text(), filename=rel)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [f"{rel}:{node.lineno}: import {a.name}" for a in node.names
                    if a.name.split(".")[0] in FORBIDDEN_MODULES and (rel, a.name) not in ALLOWED_IMPORTS]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
            out.append(f"{rel}:{node.lineno}: from {node.module} import")
        elif isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id in FORBIDDEN_CALLS:
                out.append(f"{rel}:{node.lineno}: {fn.id}()")
            elif isinstance(fn, ast.Attribute):
                if fn.attr in FORBIDDEN_ATTRS:
                    out.append(f"{rel}:{node.lineno}: .{fn.attr}()")
                elif fn.attr in DYNAMIC_ATTRS and (rel, fn.attr) not in ALLOWED:
                    literal = node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    if not literal:
                        out.append(f"{rel}:{node.lineno}: .{fn.attr}() of a non-literal")
                elif fn.attr == "load" and isinstance(fn.value, ast.Name) and fn.value.id in ("np", "numpy"):
                    if any(k.arg == "allow_pickle" for k in node.keywords):
                        out.append(f"{rel}:{node.lineno}: numpy.load(allow_pickle=...)")
    return out


def test_no_pickle_eval_or_exec_in_the_package():
    files = sorted((REPO / "dpuprof").rglob("*.py"))
    assert len(files) > 20
    findings = [f for p in files for f in _findings(p)]
    assert not findings, "\n".join(findings)


def test_the_ast_check_catches_what_it_should(tmp_path):
    # The check itself can fail: each of these lines is a finding.
    bad = tmp_path / "selfcheck.py"
    bad.write_text("import pickle\nfrom yaml import load\nx = eval(s)\nexec(s)\ndf.query(expr)\n"
                   "pd.read_pickle(p)\nimportlib.import_module(name)\nnp.load(f, allow_pickle=True)\n"
                   "df.query('a > 1')\nre.compile(x)\n")  # the last two are fine
    assert len(_findings(bad)) == 8, _findings(bad)


PAYLOADS = [
    "__import__('os').system('touch {sentinel}')",
    "eval(compile('open(\"{sentinel}\", \"w\")', 'x', 'exec'))",
    "cos\nsystem\n(S'touch {sentinel}'\ntR.",          # a pickle program, as text
    "!!python/object/apply:os.system ['touch {sentinel}']",  # a YAML tag
    "{{{{ ''.__class__.__mro__[1].__subclasses__() }}}}",
    "$(touch {sentinel})", "`touch {sentinel}`", "'; ATTACH DATABASE '{sentinel}' AS x; --",
]


def test_python_looking_payloads_come_through_as_text(tmp_path):
    sentinel = tmp_path / "pwned"
    payloads = [p.format(sentinel=sentinel) for p in PAYLOADS]
    path = tmp_path / "payload.rec"
    meta = {"cpu_count": 2, "mode": "bpf", "category_split": True, "sample_freq_hz": 99, "command": payloads,
            "host": payloads[0], "kernel": payloads[2], "cpu_model": payloads[3], "dpuprof_version": payloads[1]}
    procs = [(100 + i, 1, p[:15], p, 1, 1000.0, 1010.0) for i, p in enumerate(payloads)]
    stacks = [(i + 1, f"{p}_[k];{p} ({p})", "network", "network.tcpip") for i, p in enumerate(payloads)]
    make_recording(path, meta=meta, t0=1000.0, interval_s=10.0,
                   cpu=[(100 + i, "network", "network.tcpip", 10, 0.1) for i in range(len(payloads))],
                   tables={"stack_samples": [(100 + i, i + 1, 10) for i in range(len(payloads))],
                           "net_io": [(p, "tx", 100, 1) for p in payloads], "events": [(p, 1) for p in payloads],
                           "lost": [(p, 1) for p in payloads]},
                   processes=procs, stacks=stacks, final={"end_time": 1010.0, "exit_code": 0})
    rec = load(path)
    assert rec.meta["command"] == payloads and rec.meta["host"] == payloads[0]
    assert list(rec.table("processes")["cmdline"]) == payloads
    assert set(rec.table("lost")["kind"]) == set(payloads)
    for fmt in ("json", "folded", "speedscope", "terminal"):
        out = tmp_path / f"out.{fmt}"
        res = dpuprof("report", path, "--format", fmt, "-o", out)
        assert res.returncode == 0, (fmt, res.stderr)
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["command"] == payloads and data["host"] == payloads[0]
    assert set(data["lost"]) == set(payloads)
    assert payloads[0] in (tmp_path / "out.folded").read_text()
    res = dpuprof("project", path, "--format", "json", "-o", tmp_path / "p.json")
    assert res.returncode == 0, res.stderr
    assert not sentinel.exists(), "a payload from the recording was executed"
