"""``dpuprof doctor``: what recording needs on this machine, and how to fix what is missing."""

from __future__ import annotations

import sys

import click

EPILOG = """\b
Examples:
  sudo dpuprof doctor
  dpuprof doctor --format json
"""


@click.command(epilog=EPILOG)
@click.option("--format", "fmt", type=click.Choice(["terminal", "json"]), default="terminal", show_default=True)
def doctor(fmt):
    """Check root, bcc, kernel headers, tracefs, BTF, tracepoints, perf_event sampling and kprobe/fentry.

    Exits 0 when `dpuprof record` can run with eBPF, 1 otherwise.
    """
    from dpuprof.cli.common import echo_json
    from dpuprof.record.doctor import run_checks

    checks = run_checks()
    ok = all(c["ok"] or not c["required"] for c in checks)
    if fmt == "json":
        echo_json({"ok": ok, "checks": checks})
    else:
        for c in checks:
            mark = "ok" if c["ok"] else ("MISSING" if c["required"] else "missing (optional)")
            line = f"{c['name']:<36} {mark:<20} {c['detail']}"
            if not c["ok"] and c["fix"]:
                line += f"\n{'':<36} fix: {c['fix']}"
            click.echo(line)
        click.echo("ready to record with eBPF" if ok else "not ready: fix the MISSING lines above "
                   "(or record without root: dpuprof record --probes psutil -- CMD)")
    sys.exit(0 if ok else 1)
