"""Hardening, bad input (issue 7): fuzz the recording loader, recover a recording killed in the middle
of a commit, and bad DPU profiles. Always one clear line and exit 2: never a traceback, a hang or a
partial output file. Needs no root (a real recording is the seed when root and bcc are there).

The fuzzing mutates copies of a seed recording -- truncation, random bytes, a wrong or future
schema_version, SQL/HTML/Python metacharacters in every string field, huge, negative and
non-finite numbers (NaN, Infinity) in the JSON metadata and in the tables, dropped tables and
columns -- and checks every case through ``dpuprof.recording.load`` (plus the summary and the JSON
and terminal renderers when the file is accepted), and a sample through the real CLI.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, PYTHON, dpuprof
from dpuprof.errors import UserError
from dpuprof.recording import SCHEMA_VERSION, load
from dpuprof.recording.packing import pack_ids, unpack_ids
from dpuprof.recording.schema import DDL
from dpuprof.recording.summary import summarize
from factory import make_recording, open_recording



def _stored_schema() -> dict[str, list[tuple[str, bool]]]:
    """{table: [(column, is_text)]} of the file as the writer creates it (meta aside)."""
    db = sqlite3.connect(":memory:")
    db.executescript(DDL)
    tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'meta'")]
    return {t: [(r[1], r[2].upper() == "TEXT") for r in db.execute(f"PRAGMA table_info({t})")] for t in tables}


STORED = {t: tuple(c for c, _ in cols) for t, cols in _stored_schema().items()}
TEXT = {(t, c) for t, cols in _stored_schema().items() for c, is_text in cols if is_text}
NASTY_TEXT = [
    "'; DROP TABLE meta; --", "\" OR 1=1 --", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
    "</script><script>alert(2)</script>", "__import__('os').system('touch /tmp/dpuprof-pwned')",
    "{{7*7}}", "${7*7}", "$(touch /tmp/dpuprof-pwned)", "`id`", "%s%s%n", "\x00nul", "\u202eevil", "\ud7ff",
    "a" * 10000, "", " ", "\n\r\t", "NaN", "Infinity", "null", "[]", "{}", "1e999",
]
WEIRD_NUMBERS = [0, -1, -(2 ** 63), 2 ** 63 - 1, 2 ** 53 + 1, -(2 ** 53) - 1, 1e308, -1e308, float("inf"),
                 float("-inf"), float("nan"), 1e-320, 0.5]
WEIRD_META_RAW = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "[" * 5000, "{", "", "nul", "\"\\ud800\"",
                  "9" * 5000, "{\"a\": NaN}", "[1, 2, Infinity]", "true", "null", "-1", "1.5", "\"1\"", "[]",
                  json.dumps(10 ** 30), json.dumps(-(10 ** 30))]
SCHEMA_VALUES = [0, -1, SCHEMA_VERSION + 1, 10 ** 30, "1", 1.5, True, None, [1], {"v": 1}, "NaN"]

COUNTS = {"load": 0, "accepted": 0, "rejected": 0, "cli": 0}


# ------------------------------------------------------------------------------------ the seed

def _root_and_bcc() -> bool:
    if os.geteuid() != 0:
        return False
    from dpuprof.record.load.bcc_loader import bcc_available
    return bcc_available()[0]


SEED_WORKLOAD = """
import os, socket, threading, zlib
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def sink():
    c, _ = srv.accept()
    while c.recv(1 << 16): pass
threading.Thread(target=sink, daemon=True).start()
cli = socket.create_connection(srv.getsockname())
for _ in range(60):
    cli.sendall(zlib.compress(os.urandom(1 << 16)) * 4)
cli.close()
"""


def _synthetic(path: Path) -> None:
    meta = {"command": ["python3", "train.py"], "host": "h", "kernel": "6.1", "cpu_count": 2, "mode": "bpf",
            "category_split": True, "sample_freq_hz": 99, "interval_s": 1.0, "probes_used": ["cpu_sample"],
            "probes_unavailable": {"sock_io": "tracepoint missing"}, "dpuprof_version": "test", "user": "u"}
    tables = {
        "stack_samples": [(42, 1, 10)], "softirq": [(0, "NET_RX", 1000, 3)],
        "block_io": [("vda", "read", 4096, 1)], "block_latency": [("read", 64, 1)],
        "net_io": [("lo", "tx", 1000, 2)], "sock_io": [(42, "tcp", "send", 1000, 1)],
        "events": [("tcp_retransmit", 1)], "proc_cpu": [(42, 0.05, 0.05)],
        "host_cpu": [("user", 0.5), ("idle", 1.0)], "host_disk": [(4096, 0, 1, 0)],
        "host_net": [("lo", 1000, 1000, 2, 2)], "gpu": [(0, 10.0, 1 << 20)], "lost": [("samples_map_full", 1)],
    }
    make_recording(path, meta=meta, intervals=3,
                   cpu=[(42, "network", "network.tcpip", 10, 0.1), (0, "idle", "idle", 5, 0.05)], tables=tables,
                   processes=lambda i: [(42, 1, "python3", "python3 train.py", 1, 100.0, 101.0 + i)],
                   stacks=[(1, "a_[k];b (libc.so.6)", "network", "network.tcpip")],
                   final={"end_time": 103.0, "exit_code": 0, "start_time": 100.0, "root_pid": 42})


@pytest.fixture(scope="module")
def seed(tmp_path_factory) -> bytes:
    """Bytes of a real recording: recorded here when root and bcc are available, else a fixture,
    else (no fixtures in this checkout) a synthetic one with every table filled."""
    path = tmp_path_factory.mktemp("seed") / "seed.rec"
    if _root_and_bcc():
        res = dpuprof("record", "-q", "-F", "199", "-o", path, "--", PYTHON, "-c", SEED_WORKLOAD, timeout=120)
        assert res.returncode == 0, res.stderr
        origin = "recorded now"
    else:
        fixtures = sorted(FIXTURES.glob("*/recording.rec"), key=lambda p: p.stat().st_size)
        if fixtures:
            shutil.copyfile(fixtures[0], path)
            origin = str(fixtures[0])
        else:
            _synthetic(path)
            origin = "synthetic"
    print(f"fuzz seed: {origin}, {path.stat().st_size} bytes")
    load(path)  # the seed itself is valid
    return path.read_bytes()


# ------------------------------------------------------------------------------------ mutations

def _rowids(db, table):
    return [r[0] for r in db.execute(f"SELECT rowid FROM {table}")]


def apply(op: tuple, path: Path, seed_bytes: bytes) -> None:
    """Write the seed to ``path`` and apply one mutation ``op`` to it."""
    kind = op[0]
    if kind == "truncate":
        path.write_bytes(seed_bytes[: op[1]])
        return
    if kind == "bytes":
        data = bytearray(seed_bytes)
        for offset, chunk in op[1]:
            offset %= max(1, len(data))
            data[offset:offset + len(chunk)] = chunk
        path.write_bytes(bytes(data[: len(seed_bytes)]))
        return
    if kind == "random_file":
        path.write_bytes(op[1])
        return
    path.write_bytes(seed_bytes)
    with sqlite3.connect(path) as db:
        if kind == "meta_raw":
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (op[1], op[2]))
        elif kind == "meta_blob":
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (op[1], op[2]))
        elif kind == "meta_delete":
            db.execute("DELETE FROM meta WHERE key = ?", (op[1],))
        elif kind == "cell":
            _, table, col, pick, value = op
            ids = _rowids(db, table)
            if ids:
                db.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", (value, ids[pick % len(ids)]))
            else:
                cols = STORED[table]
                row = [value if c == col else (f"x{c}" if (table, c) in TEXT else 1) for c in cols]
                db.execute(f"INSERT OR IGNORE INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                           row)
        elif kind == "rows":
            _, table, rows = op
            cols = STORED[table]
            db.executemany(f"INSERT OR IGNORE INTO {table} ({', '.join(cols)}) VALUES "
                           f"({', '.join('?' * len(cols))})", rows)
        elif kind == "drop_table":
            db.execute(f"DROP TABLE {op[1]}")
        elif kind == "drop_column":
            db.execute(f"ALTER TABLE {op[1]} DROP COLUMN {op[2]}")
        else:
            raise AssertionError(op)


def check(path: Path, timeout_s: float = 10.0) -> str:
    """Load ``path``: a UserError with one line, or a recording whose summary and JSON and
    terminal reports work. Anything else (another exception, a multi-line message) fails."""
    from dpuprof.render import registry
    from dpuprof.render.build import build_report

    COUNTS["load"] += 1
    t0 = time.time()
    try:
        rec = load(path)
    except UserError as err:
        msg = str(err)
        assert msg and "\n" not in msg and "\r" not in msg, repr(msg)
        assert msg.startswith(str(path)) or "recording" in msg, msg
        COUNTS["rejected"] += 1
        return "rejected"
    summary = summarize(rec)
    json.dumps(summary, allow_nan=False)
    try:
        rep = build_report([path])
        json.loads(registry.get("json")(rep, stem=None, progress=None, color=False).main)
        registry.get("terminal")(rep, stem=None, progress=None, color=False)
    except UserError as err:  # the report may still refuse it, with one line
        assert "\n" not in str(err), str(err)
        COUNTS["rejected"] += 1
        return "rejected"
    assert time.time() - t0 < timeout_s, "too slow: a hang in the making"
    COUNTS["accepted"] += 1
    return "accepted"


def _col_value_strategy():
    return st.one_of(st.sampled_from(WEIRD_NUMBERS), st.integers(-(2 ** 63), 2 ** 63 - 1),
                     st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(NASTY_TEXT),
                     st.text(max_size=50), st.binary(max_size=32), st.none())


def _meta_keys(seed_bytes: bytes) -> list[str]:
    with tempfile.NamedTemporaryFile(suffix=".rec") as fh:
        fh.write(seed_bytes)
        fh.flush()
        with sqlite3.connect(fh.name) as db:
            return [k for (k,) in db.execute("SELECT key FROM meta")]


def _json_values():
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10 ** 30), 10 ** 30),
                        st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(NASTY_TEXT), st.text(max_size=20))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                        max_leaves=8)


def _ops(seed_bytes: bytes, meta_keys: list[str]):
    size = len(seed_bytes)
    tables = st.sampled_from(sorted(STORED))
    meta_key = st.sampled_from(sorted(set(meta_keys) | {"schema_version", "complete", "sample_freq_hz",
                                                         "cpu_count", "command", "probes_unavailable"}))
    cell = tables.flatmap(lambda t: st.tuples(st.just("cell"), st.just(t), st.sampled_from(STORED[t]),
                                              st.integers(0, 10 ** 6), _col_value_strategy()))

    def typed_row(table):
        return st.tuples(*[st.sampled_from(NASTY_TEXT) if (table, c) in TEXT else
                           st.one_of(st.integers(-(2 ** 53), 2 ** 53), st.sampled_from([0, 1, -1, 2 ** 53]))
                           for c in STORED[table]])
    rows = tables.flatmap(lambda t: st.tuples(st.just("rows"), st.just(t), st.lists(typed_row(t), min_size=1,
                                                                                     max_size=5)))
    return st.one_of(
        st.tuples(st.just("truncate"), st.integers(0, size)),
        st.tuples(st.just("bytes"), st.lists(st.tuples(st.integers(0, size), st.binary(min_size=1, max_size=64)),
                                             min_size=1, max_size=8)),
        st.tuples(st.just("random_file"), st.one_of(st.binary(max_size=2048),
                                                    st.binary(max_size=2048).map(lambda b: b"SQLite format 3\x00" + b))),
        st.tuples(st.just("meta_raw"), meta_key, st.one_of(st.sampled_from(WEIRD_META_RAW),
                                                          _json_values().map(json.dumps))),
        st.tuples(st.just("meta_raw"), st.just("schema_version"), st.sampled_from(SCHEMA_VALUES).map(json.dumps)),
        st.tuples(st.just("meta_blob"), meta_key, st.one_of(st.binary(max_size=16), st.integers(-(2 ** 63), 2 ** 63 - 1),
                                                          st.floats())),
        st.tuples(st.just("meta_delete"), meta_key),
        cell, rows,
        st.tuples(st.just("drop_table"), tables),
        tables.flatmap(lambda t: st.tuples(st.just("drop_column"), st.just(t), st.sampled_from(STORED[t]))),
    )


# Cases per run of the loader fuzz (the DPU-profile fuzz below takes half as many): 200, about 20 of
# each of the 10 mutation kinds, at ~0.14 s a case (300 took 40 s of the suite); every run draws anew
# (no example database), so CI runs add up. DPUPROF_FUZZ_EXAMPLES=2000 for a longer hunt.
FUZZ_EXAMPLES = int(os.environ.get("DPUPROF_FUZZ_EXAMPLES", 200))


def test_fuzz_recording_loader(seed, tmp_path):
    meta_keys = _meta_keys(seed)
    seen_kinds: dict[str, int] = {}
    workdir = Path(tempfile.mkdtemp(dir=tmp_path))

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(op=_ops(seed, meta_keys))
    def run(op):
        path = workdir / "case.rec"
        for p in workdir.iterdir():
            p.unlink()
        try:
            apply(op, path, seed)
        except sqlite3.Error:
            return  # the mutation itself was impossible (e.g. dropping a primary-key column)
        seen_kinds[op[0]] = seen_kinds.get(op[0], 0) + 1
        check(path)

    before = dict(COUNTS)
    run()
    n = COUNTS["load"] - before["load"]
    print(f"loader fuzz: {n} cases ({COUNTS['accepted'] - before['accepted']} accepted, "
          f"{COUNTS['rejected'] - before['rejected']} rejected with one line); by mutation {seen_kinds}")
    assert n >= 100 and len(seen_kinds) >= 8


def test_nasty_strings_in_every_text_field_come_through_as_text(seed, tmp_path):
    # Type-correct rows with SQL, HTML and Python metacharacters in every text column of every table,
    # and in every text metadata value: the file is accepted and the strings come back unchanged.
    path = tmp_path / "nasty.rec"
    path.write_bytes(seed)
    with sqlite3.connect(path) as db:
        for table, cols in STORED.items():
            if not any((table, c) in TEXT for c in cols):
                continue
            for i, s in enumerate(NASTY_TEXT):
                row = [s if (table, c) in TEXT else (10 ** 6 + i if c in ("pid", "stack_id", "frame_id") else 1)
                       for c in cols]
                if table == "cpu_category":
                    row[cols.index("category")] = "network"  # category names are a closed set
                if table == "stacks":
                    row[cols.index("frame_ids")] = str(10 ** 6 + i)  # a one-frame stack of frame i
                if table == "stack_list":  # schema v3: the same, packed
                    row[cols.index("frames")] = pack_ids([10 ** 6 + i])
                db.execute(f"INSERT OR IGNORE INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                           row)
        for key, (value,) in zip(("host", "kernel", "cpu_model", "user", "cwd"), [(s,) for s in NASTY_TEXT]):
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))
        db.execute("INSERT OR REPLACE INTO meta VALUES ('command', ?)", (json.dumps(NASTY_TEXT),))
    assert check(path) == "accepted"
    rec = load(path)
    assert set(NASTY_TEXT) <= set(rec.table("processes")["comm"])
    assert set(NASTY_TEXT) <= set(rec.table("stacks")["folded"])
    assert rec.meta["command"] == NASTY_TEXT
    res = dpuprof("report", path, "--format", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["command"] == NASTY_TEXT and data["host"] == NASTY_TEXT[0]
    assert not Path("/tmp/dpuprof-pwned").exists()


def test_more_samples_than_capacity_still_renders(tmp_path):
    # Found by the fuzzing: a damaged count (more samples than CPUs x Hz x seconds allow) is a
    # plausible-looking file the loader accepts; the report must still render it.
    path = tmp_path / "many.rec"
    _synthetic(path)
    with sqlite3.connect(path) as db:  # schema v3 packs cpu_category (a view): edit what it unpacks
        net = db.execute("SELECT subcategory_id FROM subcategories WHERE category = 'network'").fetchone()[0]
        for interval, blob in db.execute("SELECT interval, counts FROM cpu_counts").fetchall():
            v = unpack_ids(blob)
            v[2::4] = [1000000 if sub == net else n for sub, n in zip(v[1::4], v[2::4])]
            db.execute("UPDATE cpu_counts SET counts = ? WHERE interval = ?", (pack_ids(v), interval))
    assert check(path) == "accepted"
    res = dpuprof("report", path)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr


# ------------------------------------------------------------------------------------ through the CLI

def _random_op(rng: random.Random, seed_bytes: bytes, meta_keys: list[str]) -> tuple:
    size = len(seed_bytes)
    table = rng.choice(sorted(STORED))
    col = rng.choice(STORED[table])
    choices = [
        ("truncate", rng.randrange(size)),
        ("bytes", [(rng.randrange(size), os.urandom(rng.randint(1, 64))) for _ in range(rng.randint(1, 8))]),
        ("random_file", os.urandom(rng.randint(0, 4096))),
        ("meta_raw", rng.choice(meta_keys), rng.choice(WEIRD_META_RAW)),
        ("meta_raw", "schema_version", json.dumps(rng.choice(SCHEMA_VALUES))),
        ("cell", table, col, rng.randrange(1000), rng.choice(WEIRD_NUMBERS + NASTY_TEXT + [b"\x80pickle", None])),
        ("drop_table", table),
        # type-correct rows with nasty strings, and odd but valid metadata: these load
        ("rows", table, [tuple(rng.choice(NASTY_TEXT) if (table, c) in TEXT else rng.choice([0, 1, 7])
                               for c in STORED[table]) for _ in range(3)]),
        ("meta_raw", rng.choice(["host", "kernel", "cpu_model", "user"]), json.dumps(rng.choice(NASTY_TEXT))),
    ]
    return choices[rng.randrange(len(choices))]


def _cli_case(case_dir: Path) -> tuple:
    path = case_dir / "case.rec"
    expected = check(path)  # in-process verdict first
    out = case_dir / "out.json"
    t0 = time.time()
    res = subprocess.run([PYTHON, "-m", "dpuprof", "report", str(path), "--format", "json", "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    return path, expected, res, out, time.time() - t0


def test_fuzz_through_the_cli(seed, tmp_path):
    n = int(os.environ.get("DPUPROF_FUZZ_CLI", 16))
    rng_seed = int(os.environ.get("DPUPROF_TEST_SEED", random.randrange(1 << 30)))
    rng = random.Random(rng_seed)
    meta_keys = _meta_keys(seed)
    cases = []
    for i in range(n):
        case_dir = tmp_path / f"case{i}"
        case_dir.mkdir()
        while True:
            op = _random_op(rng, seed, meta_keys) if i else ("truncate", len(seed) // 2)
            try:
                apply(op, case_dir / "case.rec", seed)
                break
            except sqlite3.Error:
                continue
        cases.append((case_dir, op[0]))
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda c: _cli_case(c[0]), cases))
    verdicts = {}
    for (case_dir, kind), (path, expected, res, out, took) in zip(cases, results):
        COUNTS["cli"] += 1
        where = f"{kind} (seed {rng_seed}): rc {res.returncode}, stderr {res.stderr!r}"
        assert "Traceback" not in res.stderr + res.stdout, where
        assert took < 60, where
        leftovers = sorted(p.name for p in case_dir.iterdir() if p.name not in ("case.rec", "out.json"))
        assert not leftovers, f"{where}: partial files {leftovers}"
        if expected == "accepted":
            assert res.returncode == 0, where
            json.loads(out.read_text())
        else:
            assert res.returncode == 2, where
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("dpuprof: error: "), where
            assert not out.exists(), f"{where}: a partial output file was written"
            assert res.stdout == "", where
        verdicts[expected] = verdicts.get(expected, 0) + 1
    print(f"CLI fuzz sample: {n} cases {verdicts} (seed {rng_seed}); totals so far {COUNTS}")


# ------------------------------------------------------------------------------------ kill -9 mid-commit

def test_recording_killed_in_the_middle_of_a_commit_loads_up_to_its_last_interval(tmp_path):
    # A recorder killed while it commits leaves a hot rollback journal. The reader recovers in a
    # private copy; the file itself is not modified.
    path = tmp_path / "hot.rec"
    _, w = open_recording(path, intervals=3, tables={"net_io": [("lo", "tx", 1000, 2)]})
    pid = os.fork()
    if pid == 0:  # the "recorder", killed half-way through writing interval 3
        try:
            w._db.execute("PRAGMA cache_size=1")  # spill the unfinished interval into the file
            w._db.execute("BEGIN IMMEDIATE")
            w._db.execute("INSERT INTO intervals (interval, t_start, t_end) VALUES (3, 103.0, 104.0)")
            for j in range(20000):
                w._db.execute("INSERT INTO net_io VALUES (3, ?, 'tx', 1, 1)", ("x" * 64 + str(j),))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    journal = tmp_path / "hot.rec-journal"
    assert journal.stat().st_size > 0
    before = path.read_bytes()
    rec = load(path)
    assert len(rec.table("intervals")) == 3 and len(rec.table("net_io")) == 3 and not rec.complete
    assert path.read_bytes() == before and journal.exists()  # read-only: nothing changed on disk
    res = dpuprof("report", path, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["complete"] is False


def test_file_names_with_uri_characters(seed, tmp_path):
    for name in ("a?mode=rw.rec", "b#frag.rec", "c%20d.rec"):
        path = tmp_path / name
        path.write_bytes(seed)
        assert load(path).path == path


# ------------------------------------------------------------------------------------ DPU profiles

@pytest.fixture(scope="module")
def small_rec(tmp_path_factory):
    path = tmp_path_factory.mktemp("prof") / "run.rec"
    _synthetic(path)
    return path


def _profile_text():
    from dpuprof.project.profiles import data_dir
    return (data_dir() / "bluefield-2.toml").read_text()


# Cases test_project_cli.py and test_project_profiles.py do not have: values TOML itself allows but
# the model must refuse (nan, inf, huge, negative, wrong type), and files that are not TOML text.
PROFILE_CASES = {
    "nan": lambda t: t.replace("value = 1.0", "value = nan", 1),
    "inf": lambda t: t.replace("value = 1.0", "value = inf", 1),
    "negative": lambda t: t.replace("value = 1.0", "value = -1.0", 1),
    "huge": lambda t: t.replace("value = 1.0", "value = 1e400", 1),
    "string for number": lambda t: t.replace("value = 1.0", "value = \"1.0\"", 1),
    "empty file": lambda t: "",
    "binary": lambda t: "\x00\x01\x02\xff",
}


@pytest.mark.parametrize("case", list(PROFILE_CASES))
def test_bad_dpu_profile_one_line_exit_2(small_rec, tmp_path, case):
    text = _profile_text()
    bad = tmp_path / "bad.toml"
    mutated = PROFILE_CASES[case](text)
    assert mutated != text or case in ("empty file",)
    if case == "binary":
        bad.write_bytes(b"\x00\x01\x02\xff\xfe")
    else:
        bad.write_text(mutated)
    out = tmp_path / "p.json"
    res = subprocess.run([PYTHON, "-m", "dpuprof", "project", str(small_rec), "--dpu", str(bad), "-o", str(out)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, (case, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpuprof: error: "), res.stderr
    assert "Traceback" not in res.stderr and not out.exists()
    assert not list(tmp_path.glob(".proj-*"))


def test_dpu_profile_fuzz_validates_or_refuses_in_one_line(small_rec):
    # Random values at random places of a shipped profile: validate() either refuses with one line,
    # or the projection runs to a JSON-clean result.
    from dpuprof.tomlcompat import tomllib

    from dpuprof.project.inputs import from_recording
    from dpuprof.project.profiles import validate
    from dpuprof.project import build_projection as run_projection
    from dpuprof.projection.store import dumps

    raw = tomllib.loads(_profile_text())
    inp = from_recording(load(small_rec))
    paths = []

    def walk(node, where):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, where + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, where + (i,))
        paths.append(where)
    walk(raw, ())
    paths = [p for p in paths if p]
    counts = {"valid": 0, "refused": 0}

    @settings(max_examples=FUZZ_EXAMPLES // 2, deadline=None, database=None)
    @given(where=st.sampled_from(paths),
           value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10 ** 20), 10 ** 20),
                           st.sampled_from(NASTY_TEXT), st.booleans(), st.lists(st.integers(), max_size=2),
                           st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)))
    def run(where, value):
        doc = json.loads(json.dumps(raw))
        node = doc
        for k in where[:-1]:
            node = node[k]
        node[where[-1]] = value
        try:
            profile = validate(doc, "fuzz.toml")
        except UserError as err:
            assert "\n" not in str(err) and str(err).startswith("fuzz.toml"), str(err)
            counts["refused"] += 1
            return
        dumps(run_projection(inp, profile))  # the file's text: NaN and infinity refused
        counts["valid"] += 1

    run()
    print(f"DPU profile fuzz: {counts}")
    assert counts["refused"] > 0


def test_a_lone_surrogate_in_metadata_is_one_line_not_a_traceback(tmp_path):
    # Found by the fuzzer: JSON "\ud800" decodes to a string no output format can encode.
    path = tmp_path / "r.rec"
    shutil.copy(FIXTURES / "compute-bound" / "recording.rec", path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'host'", ('"\\ud800"',))
    proc = dpuprof("report", path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert "damaged metadata value for 'host'" in line
