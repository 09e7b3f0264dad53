"""The interfaces written as typing.Protocol, checked against the classes behind them: each
Protocol member exists on each class, methods with a compatible signature (the same parameters by
name, kind and default-or-not, in order; any extra ones optional; annotations equal where both
give one), data members on an instance. ``runtime_checkable``'s isinstance checks names only."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from types import SimpleNamespace

import pytest

from dpuprof.agent.background import Task
from dpuprof.agent.projecting import Projector
from dpuprof.agent.push import Pusher
from dpuprof.projection import store
from dpuprof.projection.schema import Allreduce, Evidence, OtherMode, PathBounds, Sweep, VendorComparison
from dpuprof.record.sources import BpfSource, PsutilSource, Source
from dpuprof.recording.reader import load
from dpuprof.recording.summary import HostCpu, IoTotals, NetTotals, ProcessEntry, Summary, WorkloadCpu, summarize


def _members(proto) -> tuple[list[str], list[str]]:
    """(methods, data members) a Protocol declares (its own, not object's or Protocol's)."""
    methods = sorted(n for n, v in vars(proto).items() if inspect.isfunction(v) and not n.startswith("_"))
    return methods, sorted(vars(proto).get("__annotations__", {}))


def _signature_problems(name: str, want, have) -> list[str]:
    """Why a class's method ``have`` cannot stand in for the Protocol's ``want`` (none: it can)."""
    if not callable(have):
        return [f"{name} is not a method"]
    w, h = inspect.signature(want), inspect.signature(have)
    wp, hp = list(w.parameters.values()), list(h.parameters.values())
    out = []
    for i, p in enumerate(wp):
        q = hp[i] if i < len(hp) else None
        if q is None or (q.name, q.kind) != (p.name, p.kind):
            out.append(f"{name}: parameter {i} is {q and q.name!r}, the Protocol's is {p.name!r}")
        elif p.default is not p.empty and q.default is q.empty:
            out.append(f"{name}: {p.name} has no default")
        elif p.annotation is not p.empty and q.annotation is not q.empty and p.annotation != q.annotation:
            out.append(f"{name}: {p.name} is {q.annotation}, the Protocol's {p.annotation}")
    extra = [q.name for q in hp[len(wp):] if q.default is q.empty and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]
    out += [f"{name}: extra parameter {n} without a default" for n in extra]
    if w.return_annotation is not w.empty and h.return_annotation is not h.empty \
            and w.return_annotation != h.return_annotation:
        out.append(f"{name} returns {h.return_annotation}, the Protocol's {w.return_annotation}")
    return out


def _problems(proto, cls, instance=None) -> list[str]:
    methods, data = _members(proto)
    out = [p for m in methods for p in _signature_problems(m, getattr(proto, m), getattr(cls, m, None))]
    return out + [f"no {d}" for d in data if not hasattr(instance if instance is not None else cls, d)]


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OPTS = SimpleNamespace(freq_hz=99, probes=[], duty=None, python_frames=False, psutil_only=False)


@pytest.mark.parametrize("cls", [PsutilSource, BpfSource])
def test_each_recording_mode_is_a_source(cls):
    assert _members(Source)[0] and _members(Source)[1]  # the Protocol declares both kinds
    assert _problems(Source, cls, cls(OPTS)) == []


@pytest.mark.parametrize("cls", [Pusher, Projector])
def test_each_agent_task_is_a_task(cls):
    assert _members(Task) == (["consume", "skip"], [])
    assert _problems(Task, cls) == []


def test_the_check_sees_a_missing_member_and_a_different_signature():
    class Bad:
        unavailable: dict = {}

        def consume(self, recording) -> None: ...
        def skip(self, path, reason, why, extra) -> None: ...

    assert _problems(Task, Bad) == [
        "consume: parameter 1 is 'recording', the Protocol's is 'rec'",
        "skip: why has no default",
        "skip: extra parameter extra without a default",
    ]
    assert "no category_split" in _problems(Source, Bad, Bad())
    assert "check is not a method" in _problems(Source, Bad, Bad())


def _keys(td) -> list[str]:
    return list(typing.get_type_hints(td))


@pytest.mark.parametrize("name", ["compute-bound", "ddp-plain-v1", "storage-heavy"])
def test_a_summary_has_exactly_the_typed_keys(name, fixture_copy):
    # the contract --format json prints: the TypedDicts name every key, in the order written
    s = summarize(load(fixture_copy(name)))
    assert list(s) == _keys(Summary)
    for key, td in (("host_cpu", HostCpu), ("workload_cpu", WorkloadCpu), ("io", IoTotals), ("net", NetTotals)):
        assert list(s[key]) == _keys(td), key
    assert s["processes"] and all(list(p) == [k for k in _keys(ProcessEntry) if k != "node"] for p in s["processes"])
    assert isinstance(s["duration_s"], float) and isinstance(s["category_split"], bool)


def test_the_projections_nested_fields_are_typed():
    proj = store.read(FIXTURES / "offload-crypto" / "before.proj.json")  # read only
    sp = proj.speedup
    assert isinstance(sp.evidence, Evidence) and sp.evidence.ranks and sp.evidence.ranks[0].pid > 0
    assert set(sp.bounds) == {"low", "expected", "high"} and all(isinstance(b, PathBounds) for b in sp.bounds.values())
    assert "wait_peer" in sp.evidence.ranks[0].model_extra  # the waits by reason stay, as extra keys
    again = store.validate(proj.as_json())
    assert again.as_json() == proj.as_json()  # what it writes validates back to the same
    assert typing.get_type_hints(type(sp))["other_mode"] == OtherMode | None
    assert typing.get_type_hints(type(proj))["sweep"] == Sweep | None
    with pytest.raises(ValueError, match="flag"):  # a hand-edited file fails with one line
        store.validate({**proj.as_json(), "speedup": {**proj.as_json()["speedup"], "other_mode": {"mode": "sync"}}})
    assert typing.get_type_hints(Allreduce)["vendor_comparison"] == VendorComparison | None
