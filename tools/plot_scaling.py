#!/usr/bin/env python3
"""Plots TFLOPS per GPU against GPU count from `./train scale` CSVs.

One panel per (hardware, config): a line per strategy (the throughput
model's prediction), measured points as large hollow markers of the same
colour where the CSV has them, and out-of-memory points as crosses of the
strategy's colour on the x axis. Invariant: everything drawn comes from the CSV columns; nothing
is computed here but the layout.

usage: plot_scaling.py --out scaling.png scaling.csv [more.csv ...]
"""
import argparse
import csv
import math
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = OrderedDict([
    ("ddp", ("tab:blue", "o")),
    ("full_replication", ("tab:orange", "s")),
    ("hybrid", ("tab:green", "^")),
    ("full_shard", ("tab:red", "D")),
])


def read_rows(paths):
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            rows.extend(csv.DictReader(f))
    return rows


def strategy_style(name):
    base = name.split("/")[0]
    if base in STYLE:
        return STYLE[base]
    palette = ["tab:purple", "tab:brown", "tab:pink", "tab:gray", "tab:olive", "tab:cyan"]
    return palette[hash(name) % len(palette)], "v"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="+")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = read_rows(args.csv)
    panels = OrderedDict()
    for r in rows:
        panels.setdefault((r["hardware"], r["config"]), []).append(r)

    n = len(panels)
    cols = 2 if n == 4 else min(n, 3)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 4.2 * nrows), squeeze=False)
    for ax, ((hardware, config), panel) in zip(axes.flat, panels.items()):
        params = float(panel[0]["parameters"])
        size = f"{params / 1e9:.2f}B" if params >= 1e9 else f"{params / 1e6:.1f}M"
        ax.set_title(f"{config} ({size}) on {hardware}", fontsize=10)
        strategies = OrderedDict()
        for r in panel:
            strategies.setdefault(r["strategy"], []).append(r)
        for index, (name, points) in enumerate(strategies.items()):
            color, marker = strategy_style(name)
            points.sort(key=lambda r: int(r["gpus"]))
            fit = [r for r in points if r["fits"] == "1"]
            oom = [r for r in points if r["fits"] != "1"]
            if fit:
                ax.plot([int(r["gpus"]) for r in fit], [float(r["tflops_per_gpu"]) for r in fit],
                        color=color, marker=marker, markersize=4, label=f"{name} (model)")
            measured = [r for r in points if r["measured_tflops_per_gpu"]]
            if measured:
                ax.plot([int(r["gpus"]) for r in measured],
                        [float(r["measured_tflops_per_gpu"]) for r in measured],
                        linestyle="none", marker=marker, markersize=10, markerfacecolor="none",
                        markeredgecolor=color, markeredgewidth=1.5, label=f"{name} (measured)")
            if oom:
                # Side by side, so that strategies out of memory at one count all show.
                shift = 1.0 + 0.06 * (index - (len(strategies) - 1) / 2)
                ax.plot([int(r["gpus"]) * shift for r in oom], [0] * len(oom), linestyle="none",
                        marker="x", color=color, markersize=9, markeredgewidth=2,
                        label=f"{name}: out of memory")
        ax.set_xscale("log", base=2)
        gpus = sorted({int(r["gpus"]) for r in panel})
        ax.set_xticks(gpus)
        ax.set_xticklabels([str(g) for g in gpus])
        ax.set_xlabel("GPUs (ranks)")
        ax.set_ylabel("TFLOPS per GPU")
        ax.set_ylim(bottom=-0.04 * max([float(r["tflops_per_gpu"]) for r in panel] + [1e-9]))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
