#!/usr/bin/env bash
# Where the load generator's CPU goes per new connection: HTTP/1.1, per-connection HTTP/3 and
# shared-endpoint HTTP/3, alternating, 3 rounds. perf samples the client's core (cpu-clock, a
# timer, 4 kHz: this VM has no hardware counters) while the runner measures one pinned cell
# (server on core 0, load generator on core 1); groups.py sums the load generator's samples by
# library. Run from the repository root after `cargo build --release -p runner`, as root.
set -eu
R=${RUNNER:-target/release/runner}
HERE=results/h3-client-memory/20261205-profile
OUT=${OUT:-/tmp/profile-runs}
# The runner's stack flags of a mode, into `stack`.
stack_args() {
  case $1 in
    h1) stack=(--stacks h1) ;;
    h3) stack=(--stacks h3) ;;
    h3-shared) stack=(--stacks h3 --quic-endpoint shared) ;;
  esac
}
common=(--regime new-conn --concurrency 500 --repetitions 1 --baseline-seconds 0 --pin --out "$OUT" --no-thresholds-exit)
for r in 1 2 3; do
  for mode in h1 h3 h3-shared; do
    stack_args "$mode"
    perf record -q -e cpu-clock -F 4000 -C 1 -o "$OUT/$mode-r$r.data" -- \
      "$R" "${stack[@]}" "${common[@]}" --name "$mode-r$r" >/dev/null 2>&1
  done
done
python3 "$HERE/groups.py" "$OUT" > "$HERE/groups.csv"
# System calls on the client's core, one more run each (perf stat, the runner included).
EVENTS=task-clock,page-faults,context-switches,raw_syscalls:sys_enter
for call in recvmmsg sendmsg sendto read write writev epoll_wait epoll_ctl socket setsockopt close madvise; do
  EVENTS+=",syscalls:sys_enter_$call"
done
for mode in h1 h3 h3-shared; do
  stack_args "$mode"
  perf stat -x, -e "$EVENTS" -C 1 -o "$OUT/$mode-stat.csv" -- \
    "$R" "${stack[@]}" "${common[@]}" --name "$mode-stat" >/dev/null 2>&1
done
python3 "$HERE/groups.py" --syscalls "$OUT" > "$HERE/syscalls.csv"
for mode in h1 h3 h3-shared; do
  python3 "$HERE/groups.py" --top 60 "$OUT/$mode-r1.data" > "$HERE/top-$mode.txt"
done
