#!/usr/bin/env bash
# GRO on the shared QUIC client endpoint's socket: before (8b5a193) against after (6de463c), alternating, 5 rounds;
# new-conn at 500 workers, and reuse at 100 workers; HTTP/1.1 each round for the CPU ratio.
set -u
BEFORE=${BEFORE:?a runner built at 8b5a193}
AFTER=${AFTER:-target/release/runner}
OUT=${OUT:-runs}
nc=(--regime new-conn --concurrency 500 --repetitions 1 --baseline-seconds 0 --pin --out "$OUT" --no-thresholds-exit)
ru=(--regime reuse --concurrency 100 --repetitions 1 --baseline-seconds 0 --pin --out "$OUT" --no-thresholds-exit)
for r in 1 2 3 4 5; do
  "$BEFORE" --stacks h3 --quic-endpoint shared "${nc[@]}" --name "before-newconn-r$r" >/dev/null 2>&1 || echo "b nc $r rc $?"
  "$AFTER" --stacks h3 --quic-endpoint shared "${nc[@]}" --name "after-newconn-r$r" >/dev/null 2>&1 || echo "a nc $r rc $?"
  "$AFTER" --stacks h1 "${nc[@]}" --name "h1-newconn-r$r" >/dev/null 2>&1 || echo "h1 $r rc $?"
  "$BEFORE" --stacks h3 --quic-endpoint shared "${ru[@]}" --name "before-reuse-r$r" >/dev/null 2>&1 || echo "b ru $r rc $?"
  "$AFTER" --stacks h3 --quic-endpoint shared "${ru[@]}" --name "after-reuse-r$r" >/dev/null 2>&1 || echo "a ru $r rc $?"
done
