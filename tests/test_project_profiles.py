"""DPU profiles: the shipped ones are complete and sourced; bad ones fail with one clear line."""

import math

import pytest

from dpuprof.errors import UserError
from dpuprof.project.profiles import data_dir, known_profiles, load_profile, validate
from dpuprof.tomlcompat import tomllib

SHIPPED = ("bluefield-2", "bluefield-3", "connectx-7", "ideal")


def test_shipped_profiles_and_alias():
    names = known_profiles()
    for n in SHIPPED + ("bluefield",):
        assert n in names
    assert load_profile("bluefield").name == "bluefield-3"
    assert load_profile(str(data_dir() / "bluefield-2.toml")).name == "bluefield-2"


@pytest.mark.parametrize("name", SHIPPED)
def test_every_parameter_has_a_source(name):
    """Real or nothing: every number in every shipped file is a {value, source} table."""
    with open(data_dir() / f"{name}.toml", "rb") as fh:
        raw = tomllib.load(fh)

    def walk(node, where):
        if isinstance(node, dict):
            if "value" in node:
                assert isinstance(node.get("source"), str) and len(node["source"]) > 10, where
                return
            for k, v in node.items():
                walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")
        else:
            assert not isinstance(node, (int, float)) or isinstance(node, bool) or where.endswith("schema_version"), \
                f"bare number at {where}"

    walk(raw, name)
    prof = load_profile(name)
    for m in prof.mechanisms:
        assert m.sources(), m.name
        for p in (m.alpha, m.A, m.o0_ns, m.L_ns, m.Q_ns, m.o1_ns, m.mode):
            assert p.source


def test_assumptions_are_marked():
    """Numbers we could not find published say so."""
    bf3 = load_profile("bluefield-3")
    assert bf3.capacity["arm_speed"].source.startswith("assumption")
    assert load_profile("bluefield-2").capacity["crypto_gbps"].source.startswith("assumption")


def test_device_facts():
    bf2, bf3, cx7 = (load_profile(n) for n in ("bluefield-2", "bluefield-3", "connectx-7"))
    assert bf2.cap("arm_cores") == 8 and bf2.cap("line_rate_gbps") == 200
    assert bf3.cap("arm_cores") == 16 and bf3.cap("line_rate_gbps") == 400
    assert cx7.cap("arm_cores") == 0
    assert bf2.cap("arm_speed") < 1 and bf3.cap("arm_speed") < 1  # Arm cores are slower than x86
    # BlueField-3 has decompression only (DPDK mlx5 compress guide)
    assert {m.name for m in bf3.mechanisms} >= {"decompress_engine"}
    assert "deflate_engine" not in {m.name for m in bf3.mechanisms}
    ideal = load_profile("ideal").mechanisms[0]
    assert ideal.alpha.value == 1.0 and math.isinf(ideal.A.value)
    assert ideal.o0_ns.value == ideal.L_ns.value == ideal.Q_ns.value == 0


def _minimal():
    return {
        "schema_version": 1, "name": "mine", "description": "test",
        "capacity": {"line_rate_gbps": {"value": 100, "source": "datasheet"}},
        "mechanism": [{
            "name": "rdma", "label": "RDMA", "requires": "RDMA collectives", "applies_to": ["network.*"],
            "share": "all", "runs_on": "nic", "n_from": "packets",
            "mode": {"value": "async", "source": "s"}, "alpha": {"value": 0.5, "source": "s"},
            "A": {"value": 10.0, "source": "s"}, "o0_ns": {"value": 1, "source": "s"},
            "L_ns": {"value": 1, "source": "s"}, "Q_ns": {"value": 0, "source": "s"},
            "o1_ns": {"value": 0, "source": "s"},
        }],
    }


def test_minimal_user_profile_validates():
    p = validate(_minimal(), "mine.toml")
    assert p.mechanisms[0].alpha.value == 0.5


@pytest.mark.parametrize("mutate, expect", [
    (lambda d: d["mechanism"][0]["alpha"].update(value=1.5), "alpha.value: must be <= 1"),
    (lambda d: d["mechanism"][0]["alpha"].pop("source"), "alpha: missing 'source'"),
    (lambda d: d["mechanism"][0].update(alpah={"value": 1, "source": "s"}), "unknown key 'alpah'"),
    (lambda d: d.update(colour="red"), "unknown key 'colour'"),
    (lambda d: d["mechanism"][0]["mode"].update(value="maybe"), "mode.value: must be one of"),
    (lambda d: d["mechanism"][0]["A"].update(value=0), "A.value: must be > 0"),
    (lambda d: d["mechanism"][0]["o0_ns"].update(value=-1), "o0_ns.value: must be >= 0"),
    (lambda d: d["mechanism"][0]["alpha"].update(value="high"), "alpha.value: must be a number"),
    (lambda d: d["mechanism"][0].update(applies_to=["compute.*"]), "only infrastructure categories"),
    (lambda d: d["mechanism"][0].update(resource="crypto_gbps"), "needs capacity.crypto_gbps"),
    (lambda d: d["mechanism"][0].pop("n_from"), "n_from: missing"),
    (lambda d: d.update(schema_version=9), "schema_version: must be 1"),
    (lambda d: d["capacity"]["line_rate_gbps"].update(value=-5), "line_rate_gbps.value: must be > 0"),
    # a mechanism off the Arm cores has no arm_speed to fall back to (this used to raise KeyError)
    (lambda d: d["mechanism"][0].pop("A"), "mechanism[0] (rdma).A: missing"),
    (lambda d: d["mechanism"][0]["A"].update(value=math.nan), "A.value: must be a number or inf, got nan"),
    (lambda d: d["mechanism"][0]["o0_ns"].update(value=math.inf), "o0_ns.value: must be a finite number, got inf"),
    (lambda d: d["mechanism"][0]["alpha"].update(value=True), "alpha.value: must be a number, got True"),
    (lambda d: d["mechanism"][0].update(label="  "), "(rdma).label: must not be empty"),
    (lambda d: d["mechanism"][0].update(runs_on="arm"), 'resource: work that runs on the Arm cores must use'),
    (lambda d: d["mechanism"].append(d["mechanism"][0]), "mechanism: duplicate mechanism name 'rdma'"),
    (lambda d: d.update(mechanism=[]), "mechanism: must be a non-empty array of tables"),
    (lambda d: d["mechanism"].__setitem__(0, 5), "mechanism[0]: must be a table ([[mechanism]])"),
    (lambda d: d["capacity"].__setitem__("line_rate_gbps", 100), "capacity.line_rate_gbps: must be a table {value"),
])
def test_bad_profiles_name_key_and_problem(mutate, expect):
    d = _minimal()
    mutate(d)
    with pytest.raises(UserError) as err:
        validate(d, "mine.toml")
    msg = str(err.value)
    assert msg.startswith("mine.toml: ")
    assert expect in msg
    assert "\n" not in msg


def test_arm_mechanism_takes_arm_speed_for_A():
    d = _minimal()
    d["capacity"] |= {"arm_cores": {"value": 8, "source": "s"}, "arm_speed": {"value": 0.6, "source": "bench"}}
    d["mechanism"][0] |= {"runs_on": "arm", "resource": "arm_cores"}
    d["mechanism"][0].pop("A")
    mech = validate(d, "mine.toml").mechanisms[0]
    assert mech.A.value == 0.6 and mech.A.source == "bench"
    d["capacity"].pop("arm_speed")
    with pytest.raises(UserError, match=r"mechanism\[0\] \(rdma\)\.A: missing"):
        validate(d, "mine.toml")


def test_unknown_name_lists_known():
    with pytest.raises(UserError) as err:
        load_profile("bluefield-9")
    assert "known: " in str(err.value) and "bluefield-3" in str(err.value)


@pytest.mark.parametrize("spelling", ["BlueField-3", "BLUEFIELD-3", "BlueField 3", "bluefield_3", "bluefield3"])
def test_names_ignore_case_and_separators(spelling):
    assert load_profile(spelling).name == "bluefield-3"


@pytest.mark.parametrize("typo, hint", [("bluefeild-2", "bluefield-2"), ("conectx-7", "connectx-7"), ("idael", "ideal")])
def test_a_mistyped_name_gets_the_closest(typo, hint):
    with pytest.raises(UserError) as err:
        load_profile(typo)
    assert f"(did you mean {hint}?)" in str(err.value) and "known: " in str(err.value)


def test_a_far_name_gets_no_guess():
    with pytest.raises(UserError) as err:
        load_profile("xyz")
    assert "did you mean" not in str(err.value) and "known: " in str(err.value)


def test_missing_file_and_malformed_toml(tmp_path):
    with pytest.raises(UserError, match="no such DPU profile file"):
        load_profile(str(tmp_path / "absent.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \"x\"\n[capacity\nline_rate_gbps = 3\n")
    with pytest.raises(UserError) as err:
        load_profile(str(bad))
    assert "malformed TOML" in str(err.value) and "line" in str(err.value)
