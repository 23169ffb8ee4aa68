#!/usr/bin/env python3
"""Plots training and validation loss of one or more runs from metrics.jsonl.

Each RUN is a run directory (or its metrics.jsonl). Step records ({"step",
"loss", ...}) give the training curve, {"step", "val_loss"} records the
validation points; event records ({"event": ...}) are skipped. The legend
names each run by its directory. Invariant: everything drawn is read from
the files; nothing is smoothed or computed but the x axis for --x tokens
(the tokens_seen of the train record at the same step).

usage: plot_metrics.py RUN [RUN ...] --out loss.png [--x step|tokens] [--title TEXT]
"""
import argparse
import os

from metrics_jsonl import read_run  # beside this file
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directory or metrics.jsonl")
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("--x", choices=["step", "tokens"], default="step", help="x axis")
    parser.add_argument("--title", default="", help="figure title")
    args = parser.parse_args()

    fig, ax = plt.subplots(figsize=(8, 5))
    for index, run in enumerate(args.runs):
        name, train, val = read_run(run)
        color = f"C{index % 10}"
        if args.x == "tokens":
            x_of = {step: record.get("tokens_seen", 0) for step, record in train.items()}
            x_of[0] = 0
        else:
            x_of = {step: step for step in set(train) | set(val)}
        train_steps = sorted(train)
        ax.plot([x_of[s] for s in train_steps], [train[s]["loss"] for s in train_steps],
                color=color, linewidth=1, alpha=0.8, label=f"{name} train")
        val_steps = sorted(s for s in val if s in x_of)
        if val_steps:
            ax.plot([x_of[s] for s in val_steps], [val[s] for s in val_steps], color=color,
                    linestyle="--", marker="o", label=f"{name} val")
    ax.set_xlabel("tokens" if args.x == "tokens" else "step")
    ax.set_ylabel("loss (nats per token)")
    if args.title:
        ax.set_title(args.title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
