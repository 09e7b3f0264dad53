"""Run a command as nobody (uid 65534) holding only the capabilities given, for the least-privilege
tests: ``setpriv --ambient-caps`` inside a private mount namespace where this interpreter's prefix
is bind-mounted at a path nobody can reach (root's pyenv lives under /root, mode 0700). The
bind mount is gone with the namespace; nothing on the host changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import PYTHON, REPO

NOBODY = 65534


def as_nobody(caps: str, argv: list[str], work: Path) -> subprocess.CompletedProcess:
    """``argv`` (this interpreter and its arguments) run as nobody with only ``caps`` (setpriv
    syntax: +bpf,+perfmon), this interpreter's prefix bind-mounted at ``work/py``."""
    prefix = Path(sys.base_prefix)
    py = work / "py"
    py.mkdir(exist_ok=True)
    exe = str(py / Path(PYTHON).relative_to(prefix))
    site = [str(py / Path(p).relative_to(prefix)) for p in sys.path if p.startswith(str(prefix) + "/")
            and p.endswith("-packages")]
    script = ('mount --bind "$0" "$1" && shift && exec setpriv --reuid=65534 --regid=65534 --clear-groups '
              '--inh-caps="$CAPS" --ambient-caps="$CAPS" -- "$@"')
    # The interpreter's RUNPATH names libpython under the unreachable prefix; without this the
    # loader falls back to the distribution's libpython of another patch release, whose symbols
    # the prefix's extension modules (_ssl) do not all find.
    env = dict(os.environ, CAPS=caps, HOME=str(work), PYTHONPATH=os.pathsep.join([str(REPO), *site]),
               LD_LIBRARY_PATH=str(py / "lib"))
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(prefix),
                           str(py), exe, *argv], env=env, cwd=work, capture_output=True, text=True, timeout=180)


@pytest.fixture()
def nobody_dir():
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (util-linux)")
    work = Path(tempfile.mkdtemp(prefix="dpuprof-caps-", dir="/tmp"))
    os.chmod(work, 0o777)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
