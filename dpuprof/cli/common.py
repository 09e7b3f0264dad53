"""Helpers shared by the subcommands."""

from __future__ import annotations

import json
from pathlib import Path

import click


def resolve_recording(path: str | None) -> Path:
    """The recording the user named, or the newest ``*.rec`` in the current directory."""
    from dpuprof.recording import find_default

    return Path(path) if path else find_default(".")


FORMAT_HELP = "Output format (default: terminal table on a TTY)."


def echo_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, allow_nan=False))
