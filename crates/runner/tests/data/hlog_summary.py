"""Reads the runner's .hlog files with the Python `hdrhistogram` package (module `hdrh`), a
second implementation of HdrHistogram, and prints what it decoded as one JSON object:

    {FILE: {TAG: {"count", "min", "max", "mean", "start", "length", "native", "rank"}}}

`native` maps each quantile q to hdrh's own get_value_at_percentile(100 q), which rounds the
rank q·n to the nearest integer; `rank` maps it to the value of rank ceil(q·n), the rank
Rust's hdrhistogram (and so cells.csv) uses, asked of hdrh as the percentile 100·k/n. With
--sum the histograms of all files are also added per tag (hdrh's add) under the key "sum".

usage: hlog_summary.py [--sum] [--quantiles Q,Q,...] FILE...
"""

import json
import math
import os
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

# Values are microseconds, at most 60 s (clamped); room above for the bucket's upper edge.
HIGHEST_US = 3_600_000_000


def reference():
    return HdrHistogram(1, HIGHEST_US, 3)


def describe(h, quantiles):
    n = h.get_total_count()
    native, rank = {}, {}
    for q in quantiles:
        native[repr(q)] = h.get_value_at_percentile(100.0 * q)
        if n == 0:
            rank[repr(q)] = 0
        elif q == 0.0:
            rank[repr(q)] = h.get_value_at_percentile(0.0)
        else:
            k = max(1, math.ceil(q * n))
            rank[repr(q)] = h.get_value_at_percentile(100.0 * k / n)
    return {
        "count": n,
        "min": h.get_min_value() if n else 0,
        "max": h.get_max_value(),
        "mean": h.get_mean_value(),
        "native": native,
        "rank": rank,
    }


def main(argv):
    add = "--sum" in argv
    quantiles = [0.5, 0.9, 0.95, 0.99, 0.999]
    files = []
    args = iter(a for a in argv if a != "--sum")
    for a in args:
        if a == "--quantiles":
            quantiles = [float(q) for q in next(args).split(",")]
        else:
            files.append(a)
    out, sums = {}, {}
    for path in files:
        reader = HistogramLogReader(path, reference())
        tags = {}
        while True:
            h = reader.get_next_interval_histogram()
            if h is None:
                break
            tag = h.get_tag()
            entry = describe(h, quantiles)
            entry["start"] = h.get_start_time_stamp() / 1000.0
            entry["length"] = (h.get_end_time_stamp() - h.get_start_time_stamp()) / 1000.0
            tags[tag] = entry
            if add:
                total = sums.setdefault(tag, reference())
                total.add(h)
        out[os.path.basename(path)] = tags
    if add:
        out["sum"] = {tag: describe(h, quantiles) for tag, h in sums.items()}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
