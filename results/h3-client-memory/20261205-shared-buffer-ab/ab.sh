#!/usr/bin/env bash
# Shared QUIC client endpoint: kernel-default socket buffers (before) against 4 MiB (after),
# alternating, 5 rounds; HTTP/1.1 and per-connection HTTP/3 each round for the CPU ratios.
set -u
BEFORE=${BEFORE:?a runner built at 2be213d (before the fix)}
AFTER=${AFTER:-target/release/runner}
OUT=${OUT:-runs}
common=(--regime new-conn --concurrency 500 --repetitions 1 --baseline-seconds 0 --pin --out "$OUT" --no-thresholds-exit)
for r in 1 2 3 4 5; do
  "$BEFORE" --stacks h3 --quic-endpoint shared "${common[@]}" --name "before-shared-r$r" >/dev/null 2>&1 || echo "before $r rc $?"
  "$AFTER" --stacks h3 --quic-endpoint shared "${common[@]}" --name "after-shared-r$r" >/dev/null 2>&1 || echo "after $r rc $?"
  "$AFTER" --stacks h1,h3 "${common[@]}" --name "after-perconn-r$r" >/dev/null 2>&1 || echo "perconn $r rc $?"
done
