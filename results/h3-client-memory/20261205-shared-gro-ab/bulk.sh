#!/usr/bin/env bash
# GRO on the shared QUIC client endpoint's socket, bulk: one worker downloads 5 objects of 256 MiB on
# unshaped loopback, before (8b5a193) against after (6de463c), alternating, 3 rounds.
set -u
BEFORE=${BEFORE:?a runner built at 8b5a193}
AFTER=${AFTER:-target/release/runner}
OUT=${OUT:-bulk-runs}
b=(--stacks h3 --quic-endpoint shared --regime reuse --concurrency 1 --requests-reuse 5 --warmup-fraction 0 --object download:256MiB --response-body-max-bytes 268435456 --repetitions 1 --baseline-seconds 0 --pin --out "$OUT" --no-thresholds-exit)
for r in 1 2 3; do
  "$BEFORE" "${b[@]}" --name "before-bulk-r$r" >/dev/null 2>&1 || echo "b $r rc $?"
  "$AFTER" "${b[@]}" --name "after-bulk-r$r" >/dev/null 2>&1 || echo "a $r rc $?"
done
