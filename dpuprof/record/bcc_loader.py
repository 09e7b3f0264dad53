"""Import bcc lazily, including from the distribution's Python (Debian's python3-bpfcc).

bcc is pure Python over libbcc (ctypes), so the module installed for the system Python imports into
any CPython 3 when its dist-packages directory is reachable; it is appended (never prepended) to
``sys.path`` so pip-installed packages keep precedence.
"""

from __future__ import annotations

import glob
import sys

from dpuprof.errors import UserError

_DIST_PACKAGES = ["/usr/lib/python3/dist-packages", *sorted(glob.glob("/usr/lib/python3.*/site-packages"))]
INSTALL_HINT = "sudo scripts/install-bcc.sh (or: apt-get install python3-bpfcc)"


def import_bcc():
    """Return the ``bcc`` module or raise UserError naming the fix."""
    try:
        import bcc  # noqa: F401
        return bcc
    except ImportError:
        pass
    for path in _DIST_PACKAGES:
        if path not in sys.path:
            sys.path.append(path)
    try:
        import bcc
    except (ImportError, OSError) as err:
        raise UserError(f"bcc is not available ({err}); install it with: {INSTALL_HINT}") from None
    return bcc


def bcc_available() -> tuple[bool, str]:
    """(True, version) if bcc imports, else (False, reason)."""
    try:
        bcc = import_bcc()
    except UserError as err:
        return False, str(err)
    return True, getattr(bcc, "__version__", "unknown")
