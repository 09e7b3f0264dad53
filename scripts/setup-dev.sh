#!/usr/bin/env bash
# Set up a fresh machine to develop and test dpuprof (run as root; idempotent):
#   bcc + kernel headers, the test tools (Chromium for the HTML report test, sqlite3, and iperf3,
#   fio, openssl, curl and perf for the hardening tests and benchmarks, bpftrace for an independent count
#   of scheduler events in the thread tests, and Go for `go tool pprof`,
#   the independent reader of the pprof export), and the
#   Python packages: dpuprof itself with its test and example extras (PyTorch CPU for examples/).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "setup-dev: run as root (the eBPF tests need it): sudo $0" >&2
  exit 2
fi
export DEBIAN_FRONTEND=noninteractive
scripts/install-bcc.sh
need=()
for pkg in chromium sqlite3 iperf3 fio openssl curl linux-perf bpftrace golang-go; do dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg"); done
if [ "${#need[@]}" -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e '.[test,examples]'
echo "setup-dev: ready (python3 -m pytest)"
