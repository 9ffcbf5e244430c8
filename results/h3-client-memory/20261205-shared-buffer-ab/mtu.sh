#!/usr/bin/env bash
# What QUIC path MTU discovery costs per new connection: on/off alternating, both endpoint kinds, 3 rounds.
set -u
R=${RUNNER:-target/release/runner}
OUT=${OUT:-mtu-runs}
common=(--stacks h3 --regime new-conn --concurrency 500 --repetitions 1 --baseline-seconds 0 --pin --out "$OUT" --no-thresholds-exit)
for r in 1 2 3; do
  for ep in per-connection shared; do
    for m in true false; do
      "$R" "${common[@]}" --quic-endpoint $ep --quic-mtu-discovery $m --name "mtu-$ep-$m-r$r" >/dev/null 2>&1 || echo "$ep $m $r rc $?"
    done
  done
done
