"""The agent's settings and the parsing of its option values (durations, sizes, listen address).

Each parser returns the value or raises UserError with one line naming the option and the value.
"""

from __future__ import annotations

import re
import socket
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from dpuprof.errors import UserError
from dpuprof.record.load.probes import LIGHT_FREQ_HZ, LIGHT_PROBES

#: No port is registered for dpuprof; this one is free in Prometheus' default-port list.
DEFAULT_PORT = 9477
DEFAULT_DIR = Path("/var/lib/dpuprof")

_UNITS_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_UNITS_B = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass
class AgentOptions:
    """What ``dpuprof agent`` does: record the whole host into rotating files in ``directory``
    (a new one every ``rotate_s`` seconds or ``rotate_bytes`` bytes, whichever comes first; None:
    never on that account), keep the newest ``keep``, serve /metrics on ``listen``."""

    directory: Path = DEFAULT_DIR
    rotate_s: float | None = 600.0
    rotate_bytes: int | None = None
    keep: int = 6
    listen: tuple[str, int] = ("127.0.0.1", DEFAULT_PORT)
    freq_hz: int = LIGHT_FREQ_HZ
    interval_s: float = 1.0
    probes: list[str] = field(default_factory=list)  # empty: the light set (light_probes)
    duration_s: float | None = None
    project: list[str] = field(default_factory=list)  # DPU profiles projected at each rotation (projecting.py)
    push: str | None = None  # the Pyroscope-compatible ingest URL (parse_push_url) each rotation is pushed to
    node: str = field(default_factory=socket.gethostname)
    duty: tuple[float, float] | None = None  # (on_s, period_s): record on_s of every period_s; None: always


def parse_duration(text: str, option: str = "--rotate") -> float:
    """``"10m"`` -> 600.0; a number with an optional unit s, m, h or d (seconds when none)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text.lower())
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"{option}: expected a duration such as 30s, 10m or 1h, got {text!r}")
    return float(m.group(1)) * _UNITS_S[m.group(2)]


def parse_duty(text: str, option: str = "--duty") -> tuple[float, float]:
    """``"10s/60s"`` -> (10.0, 60.0): record W of every P, two durations as ``parse_duration``
    reads them, W shorter than P."""
    on, sep, period = text.partition("/")
    if not sep:
        raise UserError(f"{option}: expected W/P, two durations such as 10s/60s, got {text!r}")
    on_s, period_s = parse_duration(on, option), parse_duration(period, option)
    if on_s >= period_s:
        raise UserError(f"{option}: the recorded part must be shorter than the period, got {text!r}")
    return on_s, period_s


def parse_size(text: str, option: str = "--rotate-size") -> int:
    """``"64M"`` -> 67108864; a number with an optional unit K, M, G or T (binary; bytes when
    none, a trailing B or iB allowed)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"{option}: expected a size such as 500K, 64M or 1G, got {text!r}")
    return int(float(m.group(1)) * _UNITS_B[m.group(2)])


def parse_listen(text: str) -> tuple[str, int]:
    """``"9477"`` -> ("127.0.0.1", 9477); ``"0.0.0.0:9477"``, ``"[::]:9477"`` as written; port 0
    takes a free port (the agent's first line names it)."""
    m = re.fullmatch(r"(?:\[([0-9a-fA-F:.]+)\]|([^:\[\]]*)):(\d+)|(\d+)", text.strip())
    if not m:
        raise UserError(f"--listen: expected PORT or ADDR:PORT (e.g. 0.0.0.0:{DEFAULT_PORT}), got {text!r}")
    port = int(m.group(3) or m.group(4))
    if not 0 <= port < 65536:
        raise UserError(f"--listen: port {port} is not in 0-65535")
    addr = m.group(1) or m.group(2) or "127.0.0.1"
    return addr, port


def parse_push_url(text: str) -> str:
    """``"http://pyroscope:4040"`` -> ``"http://pyroscope:4040/ingest"``: an http(s) URL with a
    host, optionally a path prefix (a server behind a reverse proxy); ``/ingest`` is added unless
    the path already ends with it. No query or fragment: push.py writes the query."""
    bad = f"--push: expected the server's URL, such as http://pyroscope:4040, got {text!r}"
    try:
        url = urllib.parse.urlsplit(text.strip())
        url.port  # read for its check: ValueError on a port that is not a number in 0-65535
    except ValueError:
        raise UserError(bad) from None
    if url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment:
        raise UserError(bad)
    path = url.path.rstrip("/")
    if not path.endswith("/ingest"):
        path += "/ingest"
    return urllib.parse.urlunsplit((url.scheme, url.netloc, path, "", ""))


def light_probes(names) -> list[str]:
    """The probes of ``record --light`` among ``names`` (no per-thread waits, no uprobes)."""
    return [n for n in names if n in LIGHT_PROBES]
