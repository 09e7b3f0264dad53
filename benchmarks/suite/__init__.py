"""dpuprof's benchmark suite (benchmarks/run.py), by concern:

- config: paths, launched commands, the full and --quick settings
- setup: apt-get installs of the tools, scratch inputs
- workloads: the accuracy tools and the overhead workloads, and their exact command lines
- runner: running a command with its CPU (wait4) and a /proc sampler, perf record -a -g -F 99
  alongside, BPF run-time statistics
- stats: medians, per-round ratios, shares, RSS trend, CPU-cost estimate
- accuracy, overhead, footprint: the measurements of sections 1, 2 and 3-5
- machine: the machine and its load
- verdicts, diagnosis, report, fmt: judging the targets, why a target missed, the Markdown
- cli: benchmarks/run.py's options and main

Imported with benchmarks/ on sys.path (as ``suite``), as benchmarks/validation/ is.
"""
