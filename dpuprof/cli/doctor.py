"""``dpuprof doctor``: what recording needs on this machine, and how to fix what is missing."""

from __future__ import annotations

import sys

import click

from dpuprof.cli.common import echo_json

EPILOG = """\b
Examples:
  sudo dpuprof doctor
  dpuprof doctor --format json
  sudo setpriv --reuid=$USER --regid=$USER --init-groups --inh-caps=+bpf,+perfmon,+dac_read_search,+syslog \\
      --ambient-caps=+bpf,+perfmon,+dac_read_search,+syslog -- dpuprof doctor   # capabilities, no root
"""


MARKS = {"ok": "ok", "fallback": "ok (fallback)", "unreadable": "unreadable", "not tried": "not tried",
         "not root": "no", "not held": "no"}


def _mark(check: dict) -> str:
    """The status column: what the check found, in a word or two."""
    status = check.get("status") or ("ok" if check["ok"] else "missing")
    if status in MARKS:
        return MARKS[status]
    return "MISSING" if check["required"] else "missing (optional)"


def table(checks: list[dict]) -> list[str]:
    """The terminal lines: name, status and detail in columns as wide as their widest entry, and
    under a failed check its fix (once for a run of checks with the same fix: one "run as root")."""
    marks = [_mark(c) for c in checks]
    name_w = max((len(c["name"]) for c in checks), default=0)
    mark_w = max((len(m) for m in marks), default=0)
    lines, shown = [], None
    for c, mark in zip(checks, marks):
        lines.append(f"{c['name']:<{name_w}}  {mark:<{mark_w}}  {c['detail']}".rstrip())
        if not c["ok"] and c["fix"] and c["fix"] != shown:
            lines.append(f"{'':<{name_w}}  fix: {c['fix']}")
            shown = c["fix"]
    return lines


@click.command(epilog=EPILOG)
@click.option("--format", "fmt", type=click.Choice(["terminal", "json"]), default="terminal", show_default=True)
def doctor(fmt):
    """Check privileges (uid, capabilities), bcc, kernel headers, tracefs, BTF, tracepoints,
    perf_event sampling and kprobe/fentry.

    Recording needs capabilities, not uid 0: CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN), tracefs
    readable (root-only on most systems: CAP_DAC_READ_SEARCH) and kernel symbol addresses
    (CAP_SYSLOG). Each capability dpuprof uses gets a line saying whether this process holds it and
    what it enables. Each line says ok, ok (fallback: works with a limit, e.g. headers of another
    kernel series), unreadable (present, but this user cannot read it), no (informational), not
    tried, or MISSING. With tracefs unreadable, tracepoints are looked up in /proc/kallsyms instead.
    Exits 0 when `dpuprof record` can run with eBPF, 1 otherwise. Background: docs/kernel-notes.md.
    """
    from dpuprof.record.doctor import privileges, run_checks

    checks = run_checks()
    ok = all(c["ok"] or not c["required"] for c in checks)
    if fmt == "json":
        echo_json({"ok": ok, "privileges": privileges(), "checks": checks})
    else:
        for line in table(checks):
            click.echo(line)
        click.echo("ready to record with eBPF" if ok else "not ready: fix the MISSING and unreadable lines "
                   "above (or record without root: dpuprof record --probes psutil -- CMD)")
    sys.exit(0 if ok else 1)
