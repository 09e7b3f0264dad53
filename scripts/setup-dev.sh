#!/usr/bin/env bash
# Set up a fresh machine to develop and test dpuprof (run as root; idempotent):
#   bcc + kernel headers, the test tools (Chromium for the HTML report test, sqlite3, and iperf3,
#   fio, openssl, curl and perf for the hardening tests and benchmarks, bpftrace for an independent count
#   of scheduler events in the thread tests, bpftool and gcc for the BTF reader's check against a
#   compiled struct layout (tests/test_btf.py), and Go for `go tool pprof`,
#   the independent reader of the pprof export; a Prometheus server that scrapes dpuprof agent in
#   tests/test_agent_root.py), and the
#   Python packages: dpuprof itself with its test and example extras (PyTorch CPU for examples/),
#   and Pythons 3.10 and 3.13 where missing (tests/test_python_versions.py).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "setup-dev: run as root (the eBPF tests need it): sudo $0" >&2
  exit 2
fi
export DEBIAN_FRONTEND=noninteractive
scripts/install-bcc.sh
need=()
for pkg in chromium sqlite3 iperf3 fio openssl curl linux-perf bpftrace bpftool gcc golang-go prometheus; do dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg"); done
if [ "${#need[@]}" -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e '.[test,examples]'
# The oldest and newest supported Pythons for tests/test_python_versions.py, where neither pyenv
# nor the distribution has them: uv's standalone builds (python3.X in ~/.local/bin).
for v in 3.10 3.13; do
  if ! command -v "python$v" >/dev/null && ! ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$v".* >/dev/null 2>&1; then
    python3 -m uv python install --quiet "$v"
  fi
done
echo "setup-dev: ready (python3 -m pytest)"
