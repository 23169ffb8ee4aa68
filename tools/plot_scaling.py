#!/usr/bin/env python3
"""Plots `./train scale` CSVs: the FSDP paper's two figures and this machine.

Panels, in order:
  - figure model_scale, one panel per config: TFLOPS per GPU against GPU
    count, a line per strategy, out-of-memory points as crosses of the
    strategy's colour on the x axis;
  - figure batch_scale: TFLOPS per GPU of each curve (batch per GPU,
    precision) and, beside it, the step of its first curve split into its
    parts (compute, contention, exposed communication, optimizer) per GPU
    count, as stacked bars, the compute's wait for the slowest GPU hatched;
  - figure custom (any other grid), one panel per (hardware, config), as
    model_scale;
  - each --step-time CSV (ranks sharing one machine, where TFLOPS per rank
    would read as a scaling failure): predicted step time (lines) against
    measured (hollow markers), per strategy.
Invariant: everything drawn comes from the CSV columns; nothing is computed
here but the layout and the unit conversions.

usage: plot_scaling.py --out scaling.png scaling.csv [more.csv ...] [--step-time cpu.csv ...]
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
    ("zero1", ("tab:purple", "v")),
    ("zero2", ("tab:brown", "P")),
    ("zero3", ("tab:red", "D")),
])
CURVE_COLOURS = ["tab:red", "tab:purple", "tab:gray", "tab:olive", "tab:cyan", "tab:pink"]
PARTS = [("compute_s", "compute", "tab:blue"), ("contention_s", "contention", "tab:orange"),
         ("exposed_comm_s", "exposed comm", "tab:red"), ("optimizer_s", "optimizer", "tab:green")]


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
    return CURVE_COLOURS[hash(name) % len(CURVE_COLOURS)], "v"


def size_label(panel):
    params = float(panel[0]["parameters"])
    return f"{params / 1e9:.2f}B" if params >= 1e9 else f"{params / 1e6:.1f}M"


def gpu_axis(ax, rows, label="GPUs"):
    ax.set_xscale("log", base=2)
    gpus = sorted({int(r["gpus"]) for r in rows})
    ax.set_xticks(gpus)
    ax.set_xticklabels([str(g) for g in gpus])
    ax.set_xlabel(label)
    ax.grid(True, alpha=0.3)


def tflops_panel(ax, title, panel, line_key, style_of):
    """TFLOPS per GPU, a line per value of line_key, OOM as crosses."""
    ax.set_title(title, fontsize=9)
    lines = OrderedDict()
    for r in panel:
        lines.setdefault(line_key(r), []).append(r)
    for index, (name, points) in enumerate(lines.items()):
        color, marker = style_of(name, index)
        points.sort(key=lambda r: int(r["gpus"]))
        fit = [r for r in points if r["fits"] == "1"]
        oom = [r for r in points if r["fits"] != "1"]
        if fit:
            ax.plot([int(r["gpus"]) for r in fit], [float(r["tflops_per_gpu"]) for r in fit],
                    color=color, marker=marker, markersize=4, label=name)
        measured = [r for r in points if r.get("measured_tflops_per_gpu")]
        if measured:
            ax.plot([int(r["gpus"]) for r in measured],
                    [float(r["measured_tflops_per_gpu"]) for r in measured],
                    linestyle="none", marker=marker, markersize=10, markerfacecolor="none",
                    markeredgecolor=color, markeredgewidth=1.5, label=f"{name} (measured)")
        if oom:
            # Side by side, so that strategies out of memory at one count all show.
            shift = 1.0 + 0.06 * (index - (len(lines) - 1) / 2)
            ax.plot([int(r["gpus"]) * shift for r in oom], [0] * len(oom), linestyle="none",
                    marker="x", color=color, markersize=9, markeredgewidth=2,
                    label=f"{name}: out of memory")
    gpu_axis(ax, panel)
    ax.set_ylabel("TFLOPS per GPU (model)")
    ax.set_ylim(bottom=-0.04 * max([float(r["tflops_per_gpu"]) for r in panel] + [1e-9]))
    ax.legend(fontsize=6)


def curve_name(r):
    return f"{r['strategy']}, batch {r['batch_per_gpu']}, {r['precision']} ({r['recompute']} recompute)"


def breakdown_panel(ax, title, points):
    """The parts of each point's step, stacked, in milliseconds."""
    points = sorted(points, key=lambda r: int(r["gpus"]))
    xs = list(range(len(points)))
    bottom = [0.0] * len(points)
    for key, label, color in PARTS:
        values = [1e3 * float(r[key]) for r in points]
        ax.bar(xs, values, bottom=bottom, color=color, label=label, width=0.7)
        bottom = [b + v for b, v in zip(bottom, values)]
    # The top of each compute bar that waits for the slowest GPU, hatched
    # (CSVs from before the column have none).
    waits = [1e3 * float(r.get("straggler_s") or 0) for r in points]
    if any(waits):
        tops = [1e3 * float(r["compute_s"]) for r in points]
        ax.bar(xs, waits, bottom=[t - w for t, w in zip(tops, waits)], width=0.7, fill=False,
               hatch="///", edgecolor="black", linewidth=0, label="of compute: the slowest GPU")
    ax.set_xticks(xs)
    ax.set_xticklabels([r["gpus"] for r in points])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("ms per step")
    low = min(1e3 * float(r["compute_s"]) for r in points)
    ax.set_ylim(bottom=0.9 * low, top=low + 1.4 * (max(bottom) - 0.9 * low))
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=6, loc="upper center", ncol=4)


def step_time_panel(ax, title, panel):
    """Predicted (lines) against measured (hollow markers) step time."""
    ax.set_title(title, fontsize=9)
    strategies = OrderedDict()
    for r in panel:
        strategies.setdefault(r["strategy"], []).append(r)
    for name, points in strategies.items():
        color, marker = strategy_style(name)
        points.sort(key=lambda r: int(r["gpus"]))
        ax.plot([int(r["gpus"]) for r in points], [1e3 * float(r["step_time_s"]) for r in points],
                color=color, marker=marker, markersize=4, label=f"{name} (model)")
        measured = [r for r in points if r.get("measured_step_time_s")]
        if measured:
            ax.plot([int(r["gpus"]) for r in measured],
                    [1e3 * float(r["measured_step_time_s"]) for r in measured], linestyle="none",
                    marker=marker, markersize=10, markerfacecolor="none", markeredgecolor=color,
                    markeredgewidth=1.5, label=f"{name} (measured)")
    gpu_axis(ax, panel, "ranks sharing this machine's cores")
    ax.set_ylabel("ms per step (all ranks share the cores)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=6)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="*")
    parser.add_argument("--step-time", nargs="*", default=[],
                        help="CSVs of ranks sharing one machine: plot step time, not TFLOPS")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = read_rows(args.csv)

    draws = []  # (function, args) per panel
    model_scale = OrderedDict()
    custom = OrderedDict()
    batch_scale = []
    for r in rows:
        figure = r.get("figure", "custom")
        if figure == "model_scale":
            model_scale.setdefault(r["config"], []).append(r)
        elif figure == "batch_scale":
            batch_scale.append(r)
        else:
            custom.setdefault((r["hardware"], r["config"]), []).append(r)
    for config, panel in model_scale.items():
        title = (f"{config} ({size_label(panel)}), batch {panel[0]['batch_per_gpu']}/GPU, "
                 f"{panel[0]['precision']}: {panel[0]['hardware']}")
        draws.append((tflops_panel, (title, panel, lambda r: r["strategy"],
                                     lambda name, i: strategy_style(name))))
    if batch_scale:
        config = batch_scale[0]["config"]
        title = f"{config} ({size_label(batch_scale)}): batch and precision per GPU"
        draws.append((tflops_panel, (title, batch_scale, curve_name,
                                     lambda name, i: (CURVE_COLOURS[i % len(CURVE_COLOURS)], "D"))))
        first = curve_name(batch_scale[0])
        points = [r for r in batch_scale if curve_name(r) == first and r["fits"] == "1"]
        draws.append((breakdown_panel, (f"{config} {first}:\nthe step's parts (axis from 90% of compute)", points)))
    for (hardware, config), panel in custom.items():
        draws.append((tflops_panel, (f"{config} ({size_label(panel)}) on {hardware}", panel,
                                     lambda r: r["strategy"], lambda name, i: strategy_style(name))))
    step_rows = read_rows(args.step_time)
    step_panels = OrderedDict()
    for r in step_rows:
        step_panels.setdefault((r["hardware"], r["config"]), []).append(r)
    for (hardware, config), panel in step_panels.items():
        title = f"{config} on {hardware}: step time, predicted vs measured"
        draws.append((step_time_panel, (title, panel)))

    n = len(draws)
    cols = min(n, 3)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.6 * cols, 4.4 * nrows), squeeze=False)
    for ax, (draw, draw_args) in zip(axes.flat, draws):
        draw(ax, *draw_args)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
