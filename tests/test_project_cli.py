"""``dpuprof project`` on the command line: bad input gives one line and exit 2, never a traceback;
good input prints and stores the projection.

The recordings here are small synthetic test inputs written with RecordingWriter into tmp_path
(they are not fixtures; the fixture-based test is test_project_e2e.py).
"""

import hashlib
import json
import subprocess
import sys

import pytest

from dpuprof.project.profiles import data_dir
from factory import make_recording


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "dpuprof", "project", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=60)


def _write(path, mode="bpf", with_cpu=True):
    meta = {"cpu_count": 2, "mode": mode, "category_split": mode == "bpf", "sample_freq_hz": 99,
            "command": ["python3", "synthetic.py"], "dpuprof_version": "test"}
    procs = [(100, 1, "python3", "python3 synthetic.py", 1, 0.0, 10.0),
             (101, 100, "python3", "python3 synthetic.py", 1, 0.0, 10.0)]
    cpu = []
    if with_cpu:
        cpu = [(100, "compute", "compute.torch", 300, 3.0303), (100, "network", "network.tcpip", 100, 1.0101),
               (101, "network", "network.tcpip", 100, 1.0101), (100, "compression", "compression.user", 50, 0.50505),
               (0, "idle", "idle", 1000, 10.101)]
    tables = {
        "sock_io": [(100, "tcp", "send", 5e8, 500), (101, "tcp", "send", 5e8, 500),
                    (100, "tcp", "recv", 5e8, 500), (101, "tcp", "recv", 5e8, 500)],
        "net_io": [("lo", "tx", 1e9, 30000), ("lo", "rx", 1e9, 30000)],
        "proc_cpu": [(100, 3.0, 1.5), (101, 0.1, 1.0)],
    }
    return make_recording(path, meta=meta, t0=1000.0, interval_s=10.0, cpu=cpu, tables=tables, processes=procs,
                          final={"end_time": 1010.0, "exit_code": 0})


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("cli") / "run.rec")


def assert_one_line_error(res, *needles):
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("dpuprof: error: ")
    for n in needles:
        assert n in lines[0], lines[0]


def test_unknown_dpu_lists_known(rec):
    assert_one_line_error(run(rec, "--dpu", "bluefield-9"), "unknown DPU 'bluefield-9'", "known:", "bluefield-3",
                          "connectx-7", "ideal")


def test_dpu_names_ignore_case_and_a_typo_gets_a_suggestion(rec, tmp_path):
    res = run(rec, "--dpu", "BlueField-3", "--format", "json", "-o", tmp_path / "bf3.proj.json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["dpu"]["name"] == "bluefield-3"
    assert_one_line_error(run(rec, "--dpu", "conectx-7"), "unknown DPU 'conectx-7'", "did you mean connectx-7?",
                          "known:")


def test_malformed_toml_names_problem(rec, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n[capacity\n")
    assert_one_line_error(run(rec, "--dpu", bad), "malformed TOML", "line")


def test_unknown_key_and_out_of_range(rec, tmp_path):
    text = (data_dir() / "connectx-7.toml").read_text()
    typo = tmp_path / "typo.toml"
    typo.write_text(text.replace("[capacity.crypto_gbps]", "[capacity.crypto_gbs]", 1))
    assert_one_line_error(run(rec, "--dpu", typo), "capacity: unknown key 'crypto_gbs'")
    rng = tmp_path / "range.toml"
    rng.write_text(text.replace("[mechanism.alpha]\nvalue = 1.0", "[mechanism.alpha]\nvalue = 1.5", 1))
    assert_one_line_error(run(rec, "--dpu", rng), "mechanism[0] (rdma).alpha.value: must be <= 1, got 1.5")
    nosrc = tmp_path / "nosrc.toml"
    nosrc.write_text(text.replace('[capacity.arm_cores]\nvalue = 0\nsource = "', '[capacity.arm_cores]\nvalue = 0\nnote = "', 1))
    assert_one_line_error(run(rec, "--dpu", nosrc), "capacity.arm_cores: missing 'source'")


def test_recording_without_category_data(tmp_path):
    psutil_rec = _write(tmp_path / "light.rec", mode="psutil", with_cpu=False)
    assert_one_line_error(run(psutil_rec), "no per-category CPU data", "re-record without --probes psutil")


def test_missing_or_bad_recording(tmp_path):
    assert_one_line_error(run(tmp_path / "absent.rec"), "no such recording")
    assert_one_line_error(run(cwd=tmp_path), "no recording (*.rec)")
    junk = tmp_path / "junk.rec"
    junk.write_text("not sqlite")
    assert_one_line_error(run(junk), "not a dpuprof recording")


@pytest.mark.parametrize("args, needle", [
    # click's own types (IntRange, Choice) word these; dpuprof's handler keeps them to one line
    (["--nodes", "zero"], "'--nodes': 'zero' is not a valid integer"),
    (["--nodes", "0"], "'--nodes': 0 is not in the range 1<=x<=1000000"),
    (["--gpus-per-node", "0", "--nodes", "2"], "'--gpus-per-node': 0 is not in the range 1<=x<=4096"),
    (["--gpus-per-node", "8"], "--gpus-per-node needs --nodes"),
    (["--sweep", "beta=0:1"], "unknown parameter 'beta'"),
    (["--sweep", "alpha=0:3"], "alpha must lie in [0, 1]"),
    (["--sweep", "A=0.25:2"], "ambiguous on bluefield-3: A enters arm_offload, virtio_fs"),
    (["--sweep", "snapp.alpha=0:1"], "has no mechanism 'snapp'"),
    (["--set", "rdma.o0=-1"], "o0 must lie in"),
    (["--set", "alpha=0.5"], "ambiguous on bluefield-3: alpha enters rdma, asap2"),
    (["--mode", "eventually"], "'--mode': 'eventually' is not one of 'sync', 'sync-os'"),
    (["--format", "xml"], "'--format': 'xml' is not one of 'terminal', 'json'"),
    (["--no-such-option"], "no such option '--no-such-option'; see 'dpuprof project --help'"),
])
def test_bad_options(rec, args, needle):
    assert_one_line_error(run(rec, *args), needle)


def test_unwritable_output(rec, tmp_path):
    assert_one_line_error(run(rec, "-o", tmp_path / "no" / "such" / "dir" / "p.json"), "cannot write")


def test_json_output_is_stored_in_the_current_directory(rec, tmp_path):
    here = tmp_path / "here"
    here.mkdir()
    res = run(rec, "--dpu", "bluefield-2", "--format", "json", cwd=here)
    assert res.returncode == 0, res.stderr
    # perf/Nsight's rule: the current directory, never beside the recording (it may be read-only).
    assert not rec.with_name("run.proj.json").exists()
    proj = json.loads(res.stdout)
    for key in ("projection_version", "recording", "recording_sha256", "dpu", "host", "rows", "by_category",
                "totals", "cores_for_ai", "speedup", "allreduce", "capacity", "assumptions", "warnings"):
        assert key in proj
    assert proj["dpu"]["name"] == "bluefield-2"
    assert proj["recording_sha256"] == hashlib.sha256(rec.read_bytes()).hexdigest()
    stored = here / "run.proj.json"
    assert json.loads(stored.read_text()) == proj
    assert f"stored in {stored.name}" in res.stderr
    # network: 2.02 s, all of it the workload's collective traffic -> RDMA frees almost all
    assert proj["by_category"]["network"]["before_s"] == pytest.approx(2.0202, abs=1e-4)
    assert proj["by_category"]["network"]["freed_s"] > 1.9
    assert proj["cores_for_ai"]["after_pct"] > proj["cores_for_ai"]["before_pct"]


def test_terminal_with_nodes_and_sweep(rec, tmp_path):
    out = tmp_path / "x.proj.json"
    res = run(rec, "--nodes", "32", "--gpus-per-node", "8", "--sweep", "arm_offload.A=0.5:2:4", "-o", out)
    assert res.returncode == 0, res.stderr
    for needle in ("Host cores available for AI", "Speedup of the recorded job", "All-reduce at 32 nodes x 8 GPUs",
                   "Sweep of A", "on arm_offload", "rdma", f"Stored in {out}"):
        assert needle in res.stdout
    proj = json.loads(out.read_text())
    assert proj["allreduce"]["ranks"] == 256 and len(proj["sweep"]["points"]) == 4


def test_set_changes_one_mechanism_and_is_recorded(rec, tmp_path):
    out = tmp_path / "s.proj.json"
    res = run(rec, "--set", "rdma.alpha=0", "--format", "json", "-o", out)
    assert res.returncode == 0, res.stderr
    proj = json.loads(out.read_text())
    assert proj["set"] == ["rdma.alpha=0"]
    assert not [r for r in proj["rows"] if r["mechanism"] == "rdma"]
    assert proj["by_category"]["network"]["freed_s"] == 0


def test_mode_takes_both_spellings(rec, tmp_path):
    for word in ("sync-os", "sync_os"):
        res = run(rec, "--mode", word, "--format", "json", "-o", tmp_path / f"{word}.proj.json")
        assert res.returncode == 0, res.stderr
        proj = json.loads(res.stdout)
        assert proj["mode_override"] == "sync_os"
        assert {r["mode"] for r in proj["rows"] + proj["rejected"]} <= {"sync_os"}
