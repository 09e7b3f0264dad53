"""Judge the targets and write RESULTS.md from the measurements in results.json (run.py's output).

Every number here comes from the measurements; the text around them only explains what they mean.
Re-render without re-running: ``python3 benchmarks/results_md.py benchmarks/results.json``.
The code is in benchmarks/suite/ (verdicts.py, diagnosis.py, report.py); this is its entry point.
"""

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # dpuprof from this checkout
sys.path.insert(0, str(BENCH))  # suite

from suite.report import render  # noqa: E402
from suite.verdicts import evaluate  # noqa: E402

__all__ = ["evaluate", "render", "main"]


def main(argv: list[str]) -> int:
    """Re-render RESULTS.md beside the results.json named in ``argv`` (default benchmarks/)."""
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[0] + "\n\nusage: python3 benchmarks/results_md.py [RESULTS_JSON]")
        return 0
    path = Path(argv[0] if argv else BENCH / "results.json")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        print(f"results_md: cannot read {path}: {err}", file=sys.stderr)
        return 2
    data["targets"] = evaluate(data)
    (path.parent / "RESULTS.md").write_text(render(data))
    print(f"wrote {path.parent / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
