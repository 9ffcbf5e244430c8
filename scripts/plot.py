#!/usr/bin/env python3
"""Figures from a results directory (cells.csv, latency.csv, summary.csv), as PNG and PDF.

Usage: scripts/plot.py RESULTS_DIR [--out DIR] [--cdf-concurrency N]

Writes into RESULTS_DIR/figures (or --out):
  throughput.{png,pdf}   successful req/s vs concurrency, one panel per regime
  latency_p95.{png,pdf}  p95 latency vs concurrency
  success_rate.{png,pdf} success rate vs concurrency
  server_resources.{png,pdf}  server peak RSS and mean CPU vs concurrency
  latency_cdf.{png,pdf}  latency CDF per stack at one concurrency, one panel per regime
  new_conn_breakdown.{png,pdf}  new-conn mean latency split into connect, handshake,
                         time to first byte and the rest (only if the run has new-conn cells)
  latency_throughput.{png,pdf}  a rate sweep's curve (only if the run has curve.csv): p50, p99
                         and p99.9 latency against achieved throughput, each point labelled with
                         its offered rate, the knee ringed (the runner marks it in curve.csv)
Every line has markers as well as colours, so the figures read in black and white. Stacks are
named, ordered and styled from the run's manifest.json ("stacks": the registry in order), so a
stack keeps its colour, marker and dash in every figure and a new stack needs no edit here.
"""
import argparse
import json
import sys
from pathlib import Path

# Without its packages a newcomer would meet a traceback; one line says what to install.
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
    import pandas as pd  # noqa: E402
except ImportError:
    print(
        "plot.py needs matplotlib and pandas: pip install -r scripts/requirements.txt",
        file=sys.stderr,
    )
    sys.exit(2)

# Styles by registry position (the manifest's "stacks" order); they wrap around beyond eight.
MARKERS = ["o", "s", "^", "D", "v", "X", "P", "*"]
DASHES = ["-", "--", "-.", ":", (0, (6, 2)), (0, (4, 1, 1, 1)), (0, (1, 1)), (0, (8, 2, 2, 2))]
# name -> (label, registry position), filled from the manifest by load().
STACKS = {}


def fail(message):
    print(f"plot.py: {message}", file=sys.stderr)
    sys.exit(2)


def load(results):
    cells_path = results / "cells.csv"
    if not results.is_dir() or not cells_path.is_file():
        fail(f"{results} is not a results directory (no cells.csv); run the runner first")
    cells = pd.read_csv(cells_path)
    needed = {"stage", "stack", "regime", "concurrency", "throughput_rps", "latency_p95_us"}
    missing = needed - set(cells.columns)
    if missing:
        fail(f"{cells_path} lacks columns {sorted(missing)}: not a cells.csv of this suite")
    cells = cells[(cells["stage"] == "stress") & (cells["error"].isna() | (cells["error"] == ""))]
    if cells.empty:
        fail(f"{cells_path} has no stress cells to plot")
    summary_path = results / "summary.csv"
    summary = pd.read_csv(summary_path) if summary_path.is_file() else None
    latency_path = results / "latency.csv"
    latency = pd.read_csv(latency_path) if latency_path.is_file() else None
    if latency is not None:
        # The cell's own latency distribution: not a mix entry's, not streaming message gaps.
        if "request" in latency:
            latency = latency[latency["request"].isna() | (latency["request"] == "")]
        if "metric" in latency:
            latency = latency[latency["metric"].fillna("latency") == "latency"]
    load_stacks(results, cells)
    return cells, summary, latency


def load_stacks(results, cells):
    """The stacks' labels and order from manifest.json; a manifest written before it listed
    them gives the experiment's stacks, labelled by name. Stacks only in cells.csv come last."""
    manifest_path = results / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    listed = manifest.get("stacks") or [
        {"name": name} for name in manifest.get("experiment", {}).get("stacks", [])]
    for entry in listed:
        STACKS.setdefault(entry["name"], (entry.get("label") or entry["name"], len(STACKS)))
    for name in cells["stack"].unique():
        STACKS.setdefault(name, (name, len(STACKS)))


def style(stack):
    """(label, marker, dash, colour) of a stack, by its registry position."""
    label, i = STACKS.get(stack, (stack, len(STACKS)))
    return label, MARKERS[i % len(MARKERS)], DASHES[i % len(DASHES)], f"C{i % 10}"


def per_regime_figure(cells, title):
    regimes = sorted(cells["regime"].unique())
    fig, axes = plt.subplots(1, len(regimes), figsize=(6 * len(regimes), 4.2), squeeze=False)
    fig.suptitle(title)
    return fig, dict(zip(regimes, axes[0]))


def line_plot(cells, summary, column, ylabel, title, path, scale=1.0, logy=False):
    fig, axes = per_regime_figure(cells, title)
    for regime, ax in axes.items():
        sub = cells[cells["regime"] == regime]
        for stack in sub["stack"].unique():
            label, marker, dash, colour = style(stack)
            s = sub[sub["stack"] == stack].groupby("concurrency")[column].mean().sort_index()
            ax.plot(s.index, s.values * scale, marker=marker, linestyle=dash, color=colour, label=label)
            if summary is not None and f"{column}_ci95_low" in summary.columns:
                band = summary[(summary["stage"] == "stress") & (summary["regime"] == regime)
                               & (summary["stack"] == stack)].sort_values("concurrency")
                band = band.dropna(subset=[f"{column}_ci95_low"])
                if not band.empty:
                    ax.fill_between(band["concurrency"], band[f"{column}_ci95_low"] * scale,
                                    band[f"{column}_ci95_high"] * scale, alpha=0.2)
        ax.set_title(f"{regime}")
        ax.set_xlabel("concurrent workers")
        ax.set_ylabel(ylabel)
        if sub["concurrency"].nunique() > 1 and sub["concurrency"].max() / sub["concurrency"].min() >= 10:
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    save(fig, path)


def resources_plot(cells, path):
    fig, axes = plt.subplots(2, cells["regime"].nunique(), figsize=(6 * cells["regime"].nunique(), 7.5),
                             squeeze=False)
    fig.suptitle("Server resources under load")
    for col, regime in enumerate(sorted(cells["regime"].unique())):
        sub = cells[cells["regime"] == regime]
        for stack in sub["stack"].unique():
            label, marker, dash, colour = style(stack)
            s = sub[sub["stack"] == stack].groupby("concurrency")
            axes[0][col].plot(s["server_rss_peak_bytes"].mean() / 1e6, marker=marker, linestyle=dash, color=colour,
                              label=label)
            axes[1][col].plot(s["server_cpu_pct_mean"].mean(), marker=marker, linestyle=dash, color=colour,
                              label=label)
        axes[0][col].set_title(f"{regime}: server peak RSS")
        axes[0][col].set_ylabel("peak RSS (MB)")
        axes[1][col].set_title(f"{regime}: server CPU")
        axes[1][col].set_ylabel("mean CPU (% of one core)")
        for ax in (axes[0][col], axes[1][col]):
            ax.set_xlabel("concurrent workers")
            ax.set_xscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
    save(fig, path)


def cdf_plot(cells, latency, concurrency, path):
    if latency is None:
        return
    fig, axes = per_regime_figure(cells, f"Latency CDF at {concurrency} workers")
    for regime, ax in axes.items():
        sub = cells[(cells["regime"] == regime) & (cells["concurrency"] == concurrency)]
        for _, row in sub.drop_duplicates("stack").iterrows():
            label, marker, dash, colour = style(row["stack"])
            q = latency[latency["cell_key"] == row["cell_key"]].sort_values("quantile")
            ax.plot(q["latency_us"] / 1000.0, q["quantile"], marker=marker, markersize=3,
                    linestyle=dash, color=colour, label=label)
        ax.set_title(regime)
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("fraction of requests ≤ latency")
        ax.set_xscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    save(fig, path)


def breakdown_plot(cells, path):
    sub = cells[cells["regime"] == "new-conn"]
    if sub.empty:
        return False
    sub = sub.groupby(["stack", "concurrency"])[
        ["connect_mean_us", "handshake_mean_us", "ttfb_mean_us", "latency_mean_us"]].mean().reset_index()
    sub["rest_us"] = (sub["latency_mean_us"] - sub["connect_mean_us"] - sub["handshake_mean_us"]
                      - sub["ttfb_mean_us"]).clip(lower=0)
    labels = [f"{style(r.stack)[0]}\nc={r.concurrency}" for r in sub.itertuples()]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(sub)), 4.5))
    bottom = pd.Series([0.0] * len(sub))
    parts = [("connect_mean_us", "TCP connect", "//"), ("handshake_mean_us", "TLS/QUIC handshake", ".."),
             ("ttfb_mean_us", "request → first byte", "xx"), ("rest_us", "rest (queueing, body)", "")]
    for column, label, hatch in parts:
        values = sub[column].reset_index(drop=True) / 1000.0
        ax.bar(range(len(sub)), values, bottom=bottom, label=label, hatch=hatch, edgecolor="black")
        bottom = bottom + values
    ax.set_xticks(range(len(sub)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("mean latency (ms)")
    ax.set_title("New-connection latency by phase")
    ax.legend()
    save(fig, path)
    return True


def curve_plot(results, path):
    """The latency-throughput curve of a rate sweep from curve.csv (the runner's means and its
    knee rule, docs/capacity.md): a row of panels (p50, p99, p99.9) per variant, regime and
    level."""
    curve_path = results / "curve.csv"
    if not curve_path.is_file():
        return
    curve = pd.read_csv(curve_path)
    panels = curve[["variant", "regime", "concurrency"]].drop_duplicates().values.tolist()
    columns = [("latency_p50_us", "p50"), ("latency_p99_us", "p99"), ("latency_p999_us", "p99.9")]
    fig, axes = plt.subplots(len(panels), 3, figsize=(16, 4.2 * len(panels)), squeeze=False)
    fig.suptitle("Latency vs achieved throughput (open-loop rate sweep)")
    for row, (variant, regime, concurrency) in enumerate(panels):
        sub = curve[(curve["variant"] == variant) & (curve["regime"] == regime)
                    & (curve["concurrency"] == concurrency)]
        for col, (column, name) in enumerate(columns):
            ax = axes[row][col]
            for stack in sorted(sub["stack"].unique(), key=lambda s: STACKS.get(s, (s, 99))[1]):
                label, marker, dash, colour = style(stack)
                pts = sub[sub["stack"] == stack].sort_values("offered_rps")
                ax.plot(pts["achieved_rps"], pts[column] / 1000, marker=marker, linestyle=dash,
                        color=colour, label=label)
                for _, p in pts.iterrows():
                    ax.annotate(f"{p['offered_rps']:g}", (p["achieved_rps"], p[column] / 1000),
                                textcoords="offset points", xytext=(3, 4), fontsize=6, color=colour)
                knee = pts[pts["knee"].astype(str).str.lower() == "true"]
                ax.scatter(knee["achieved_rps"], knee[column] / 1000, s=160, facecolors="none",
                           edgecolors=colour, linewidths=1.5)
            title = f"{name} — {regime}, c = {concurrency}"
            if variant != "default":
                title += f" ({variant})"
            ax.set_title(title)
            ax.set_xlabel("achieved throughput (req/s); labels: offered req/s")
            ax.set_ylabel(f"{name} latency (ms)")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
    save(fig, path)


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=120)
    fig.savefig(path.with_suffix(".pdf"))
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cdf-concurrency", type=int)
    args = parser.parse_args()
    cells, summary, latency = load(args.results)
    out = args.out or args.results / "figures"
    out.mkdir(parents=True, exist_ok=True)
    line_plot(cells, summary, "throughput_rps", "successful requests / s", "Throughput", out / "throughput")
    line_plot(cells, summary, "latency_p95_us", "p95 latency (ms)", "p95 latency", out / "latency_p95",
              scale=1e-3, logy=True)
    line_plot(cells, summary, "success_rate", "success rate (%)", "Success rate", out / "success_rate", scale=100)
    resources_plot(cells, out / "server_resources")
    concurrency = args.cdf_concurrency or int(cells["concurrency"].max())
    if concurrency not in set(cells["concurrency"]):
        fail(f"no cells at concurrency {concurrency}")
    cdf_plot(cells, latency, concurrency, out / "latency_cdf")
    breakdown_plot(cells, out / "new_conn_breakdown")
    curve_plot(args.results, out / "latency_throughput")
    print(f"figures written to {out}")


if __name__ == "__main__":
    main()
