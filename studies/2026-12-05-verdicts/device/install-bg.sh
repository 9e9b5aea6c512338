#!/usr/bin/env bash
# On the device, in the command that carries the last bundle piece (.device/p08) and .device-data: check the
# pieces (.device/p00's PIECES.SHA256), cut them back into bundle.py's 48-MiB parts (install.sh checks those against
# SHA256SUMS), keep .device-data as /tmp/device-data (tools/h200/h200-prepare.sh reads it there), and start install.sh
# in its own session (it outlives this command; /tmp/install.log). Idempotent: a second call does nothing.
set -euo pipefail
[ -f /tmp/envs/.complete ] && { echo "install-bg: already installed"; exit 0; }
[ -d .device-data ] && { rm -rf /tmp/device-data; cp -r .device-data /tmp/device-data; }
cd /tmp/chunks
if ! ls part.* >/dev/null 2>&1; then
  sha256sum --quiet -c PIECES.SHA256
  cat $(ls piece.* | sort) | split -b 48M -d -a 2 - part.
  rm -f piece.*
fi
sha256sum --quiet -c SHA256SUMS
setsid nohup bash /tmp/chunks/install.sh > /tmp/install.log 2>&1 < /dev/null &
echo "install-bg: $(ls part.* | wc -l) parts checked; install.sh started ($(date +%T))"
