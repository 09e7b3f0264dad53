"""deploy/: the systemd unit and the Kubernetes DaemonSet grant the same capabilities, the ones
``dpuprof doctor`` names, and no more (not privileged, host PID namespace); as root, the agent
runs as nobody holding exactly the unit's AmbientCapabilities= and records."""

from __future__ import annotations

import configparser

import pytest
import yaml

from capsrun import as_nobody, nobody_dir  # noqa: F401 (a fixture)
from conftest import REPO
from dpuprof.record.workload.privilege import NAMES

UNIT = REPO / "deploy" / "systemd" / "dpuprof-agent.service"
DAEMONSET = REPO / "deploy" / "kubernetes" / "dpuprof-agent.yaml"
SBATCH = REPO / "deploy" / "slurm" / "dpuprof-agent.sbatch"


def unit_caps() -> set[str]:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string(UNIT.read_text())
    service = unit["Service"]
    ambient = set(service["AmbientCapabilities"].split())
    assert ambient == set(service["CapabilityBoundingSet"].split())
    assert service["ExecStart"].split()[1] == "agent" and service["User"] != "root"
    assert service["Environment"] == f"DPUPROF_PROBE_CACHE=/var/cache/{service['CacheDirectory']}"
    return ambient


def test_deployments_grant_the_capabilities_doctor_names_and_no_more():
    caps = unit_caps()
    assert caps <= set(NAMES.values()) and {"CAP_BPF", "CAP_PERFMON"} <= caps
    spec = yaml.safe_load(DAEMONSET.read_text())["spec"]["template"]["spec"]
    assert spec["hostPID"] is True
    (container,) = spec["containers"]
    sec = container["securityContext"]
    assert sec["privileged"] is False and sec["capabilities"]["drop"] == ["ALL"]
    assert {"CAP_" + c for c in sec["capabilities"]["add"]} == caps
    assert container["args"][0] == "agent"
    assert "dpuprof agent" in SBATCH.read_text()


@pytest.mark.root
def test_the_agent_records_as_nobody_with_the_units_capabilities(nobody_dir):  # noqa: F811
    from dpuprof.recording import load

    setpriv = ",".join("+" + c.removeprefix("CAP_").lower() for c in sorted(unit_caps()))
    recs = nobody_dir / "recs"
    proc = as_nobody(setpriv, ["-m", "dpuprof", "agent", "-D", str(recs), "--rotate", "2s", "-d", "5",
                               "--listen", "127.0.0.1:0"], nobody_dir)
    assert proc.returncode == 0, proc.stderr
    files = sorted(recs.glob("*.rec"))
    assert len(files) >= 2, proc.stderr
    for path in files:
        rec = load(path)
        assert rec.complete and not rec.table("cpu_category").empty, path


@pytest.mark.root
def test_the_agent_without_the_capabilities_says_which_in_one_line(nobody_dir):  # noqa: F811
    proc = as_nobody("+bpf", ["-m", "dpuprof", "agent", "-D", str(nobody_dir / "recs"), "--listen", "127.0.0.1:0"],
                     nobody_dir)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("dpuprof: error:") and "CAP_PERFMON" in line
    assert not (nobody_dir / "recs").exists()  # nothing started
