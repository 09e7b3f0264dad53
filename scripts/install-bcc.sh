#!/usr/bin/env bash
# Idempotent installer for bcc (Debian python3-bpfcc) and the kernel headers it compiles against.
# Prefers linux-headers-$(uname -r); where the distribution has none for this kernel (Firecracker and
# other custom kernels) it falls back to the newest Debian header package and links it into
# /lib/modules/$(uname -r) -- tracepoint and perf_event programs only need the UAPI/struct layout that
# BTF-era kernels keep stable. See docs/kernel-notes.md.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "install-bcc: must run as root (try: sudo $0)" >&2
  exit 2
fi

export DEBIAN_FRONTEND=noninteractive
kver=$(uname -r)
apt_updated=0
apt_update() { if [ "$apt_updated" -eq 0 ]; then apt-get update -qq; apt_updated=1; fi; }

if ! dpkg -s python3-bpfcc >/dev/null 2>&1 || ! dpkg -s bpfcc-tools >/dev/null 2>&1; then
  apt_update
  apt-get install -y -qq python3-bpfcc bpfcc-tools >/dev/null
fi

if [ -e "/lib/modules/$kver/build/include" ]; then
  echo "install-bcc: headers present at /lib/modules/$kver/build"
else
  apt_update
  if apt-cache show "linux-headers-$kver" >/dev/null 2>&1; then
    apt-get install -y -qq "linux-headers-$kver" >/dev/null
  else
    # Newest plain Debian flavour, e.g. linux-headers-6.1.0-44-amd64 (not -rt, -cloud or backports).
    pkg=$(apt-cache pkgnames linux-headers- | grep -E '^linux-headers-[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-amd64$' | sort -V | tail -n1)
    if [ -z "$pkg" ]; then
      echo "install-bcc: no linux-headers package available for $kver" >&2
      exit 1
    fi
    echo "install-bcc: WARNING: no linux-headers-$kver; falling back to $pkg" >&2
    apt-get install -y -qq "$pkg" >/dev/null
    hdr=${pkg#linux-headers-}            # 6.1.0-44-amd64
    common="/usr/src/linux-headers-${hdr%-amd64}-common"
    mkdir -p "/lib/modules/$kver"
    ln -sfn "/usr/src/linux-headers-$hdr" "/lib/modules/$kver/build"
    ln -sfn "$common" "/lib/modules/$kver/source"
  fi
fi

# tracefs is where bcc finds tracepoint formats; some VMs boot without it mounted.
if [ ! -e /sys/kernel/tracing/events ] && [ ! -e /sys/kernel/debug/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi

PYTHONPATH=/usr/lib/python3/dist-packages /usr/bin/python3 -c 'import bcc; print("install-bcc: bcc", bcc.__version__ if hasattr(bcc, "__version__") else "ok")'
