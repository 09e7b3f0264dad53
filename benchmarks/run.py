#!/usr/bin/env python3
"""dpuprof's benchmark suite, as root: ``sudo python3 benchmarks/run.py [--quick]`` (options:
``--help``). The suite lives in benchmarks/suite/; this is its entry point."""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # dpuprof from this checkout
sys.path.insert(0, str(BENCH))  # suite, perfclass

from suite.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
