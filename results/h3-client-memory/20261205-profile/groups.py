#!/usr/bin/env python3
"""The load generator's CPU samples (perf record on its core) summed by library.

groups.py DIR            every DIR/MODE-rN.data with its run's DIR/*-MODE-rN/cells.csv: CSV
                         (mode, round, group, samples, share, us_per_connection) on stdout
groups.py --top N FILE   the N symbols with most samples in FILE, with their group
groups.py --syscalls DIR every DIR/MODE-stat.csv (perf stat -x,) per connection of its run:
                         CSV (mode, event, count, per_connection); this one counts the whole
                         core, the runner included

Only the process with most samples counts: the load generator (the runner that starts it
shares its core but only samples /proc). A sample is 250 us of CPU (4 kHz); a connection is a
warm-up or measured request, every one on a new connection.
"""
import csv
import re
import subprocess
import sys
from pathlib import Path

SAMPLE_US = 250.0
# Ordered: the first pattern a symbol matches names its group.
GROUPS = [
    ("crypto (ring)", re.compile(r"ring_core|ring::|nistz256|^fe4?_|curve25519|sha256|sha512")),
    # The project's own QUIC client code, before quinn's (its runtime wrapper names quinn's trait).
    ("HTTP and client code", re.compile(r"h3_transport|stack_h3")),
    ("quinn-proto", re.compile(r"quinn_proto")),
    ("quinn-udp", re.compile(r"quinn_udp")),
    ("quinn", re.compile(r"quinn")),
    ("rustls", re.compile(r"rustls")),
    ("HTTP and client code", re.compile(r"\bh3::|h3_|stack_h1|httparse|http::")),
    ("tokio", re.compile(r"tokio")),
    ("allocator", re.compile(r"rjem|jemalloc|tcache|edata|arena_")),
    ("memcpy / memset", re.compile(r"memmove|memcpy|memset")),
]


def samples(data):
    """[(samples, pid, is_kernel, symbol)] of the process with most samples in `data`."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--sort", "pid,sym", "--stdio",
                          "-F", "sample,pid,sym"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+):\S+\s+\[(.)\]\s+(.*\S)", line)
        if m:
            rows.append((int(m[1]), int(m[2]), m[3] == "k", m[4]))
    per_pid = {}
    for n, pid, _, _ in rows:
        per_pid[pid] = per_pid.get(pid, 0) + n
    top = max(per_pid, key=per_pid.get)
    return [r for r in rows if r[1] == top]


def group(is_kernel, symbol):
    if is_kernel:
        return "kernel"
    return next((name for name, pattern in GROUPS if pattern.search(symbol)), "other")


def connections(data):
    run = next(data.parent.glob(f"*-{data.stem.removesuffix('.data')}/cells.csv"))
    row = next(csv.DictReader(open(run)))
    return int(row["ok"]) + int(row["warmup_ok"]), int(row["failed"])


def main():
    if sys.argv[1] == "--syscalls":
        w = csv.writer(sys.stdout)
        w.writerow(["mode", "event", "count", "per_connection", "connections"])
        for stat in sorted(Path(sys.argv[2]).glob("*-stat.csv")):
            mode = stat.stem.rsplit("-", 1)[0]
            conns, _ = connections(stat.with_name(f"{mode}-stat.data"))
            for line in stat.read_text().splitlines():
                fields = line.split(",")
                if len(fields) < 3 or not fields[0].replace(".", "").isdigit():
                    continue
                count, event = float(fields[0]), fields[2]
                w.writerow([mode, event, round(count, 1), round(count / conns, 2), conns])
        return
    if sys.argv[1] == "--top":
        n, data = int(sys.argv[2]), Path(sys.argv[3])
        rows = sorted(samples(data), reverse=True)
        total = sum(r[0] for r in rows)
        print(f"# {data.name}: {total} samples of the load generator; top {n} symbols")
        for s, _, k, sym in rows[:n]:
            print(f"{s:6} {100 * s / total:5.1f}%  {group(k, sym):16} {sym}")
        return
    w = csv.writer(sys.stdout)
    w.writerow(["mode", "round", "group", "samples", "share", "us_per_connection", "connections", "failed"])
    for data in sorted(Path(sys.argv[1]).glob("*-r*.data")):
        mode, rnd = data.stem.rsplit("-r", 1)
        conns, failed = connections(data)
        by = {}
        for s, _, k, sym in samples(data):
            by[group(k, sym)] = by.get(group(k, sym), 0) + s
        total = sum(by.values())
        for g, s in sorted(by.items(), key=lambda x: -x[1]) + [("total", total)]:
            w.writerow([mode, rnd, g, s, round(s / total, 4), round(s * SAMPLE_US / conns, 1), conns, failed])


if __name__ == "__main__":
    main()
