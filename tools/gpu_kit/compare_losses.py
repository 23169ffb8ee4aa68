#!/usr/bin/env python3
"""Compares two runs' training losses from their metrics.jsonl: the check
behind issue 44's FP8 target (fp8's final loss within 1% of bf16's, no spikes).

usage: compare_losses.py BASELINE.jsonl CANDIDATE.jsonl [--tail N] [--within F]

The final loss of a run is the mean of its last N step losses (20), which
averages out the batch-to-batch noise of a single step. A spike is a step
whose loss exceeds 1.5x the mean of the 10 steps before it (after step 10).
When both runs have validation losses, their last ones are compared too
(issue 56's FP8 target is on the validation loss). Prints one line per run
and a verdict; exits 1 when the candidate's final loss, or its last
validation loss, is off by more than F (0.01, relative) or either run has a
spike.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from metrics_jsonl import read_run  # noqa: E402  (tools/metrics_jsonl.py)


def losses(path):
    """[(step, loss)] of the train records of a metrics.jsonl, in step order,
    and [(step, val_loss)] of its validation points."""
    _, train, val = read_run(path)
    if not train:
        sys.exit(f"compare_losses.py: {path}: no step losses")
    return sorted((step, record["loss"]) for step, record in train.items()), sorted(val.items())


def spikes(curve, window=10, factor=1.5):
    """Steps whose loss is over factor x the mean of the window before them."""
    found = []
    for i in range(window, len(curve)):
        before = sum(loss for _, loss in curve[i - window:i]) / window
        if curve[i][1] > factor * before:
            found.append(curve[i][0])
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline")
    parser.add_argument("candidate")
    parser.add_argument("--tail", type=int, default=20)
    parser.add_argument("--within", type=float, default=0.01)
    args = parser.parse_args()
    ok = True
    finals, last_vals = [], []
    for path in (args.baseline, args.candidate):
        curve, val = losses(path)
        tail = curve[-args.tail:]
        final = sum(loss for _, loss in tail) / len(tail)
        found = spikes(curve)
        finals.append(final)
        last_vals.append(val[-1] if val else None)
        shown = f", last validation loss {val[-1][1]:.4f} at step {val[-1][0]}" if val else ""
        print(f"{path}: {len(curve)} steps, first loss {curve[0][1]:.4f}, "
              f"final (mean of last {len(tail)}) {final:.4f}{shown}, spikes at {found or 'none'}")
        ok = ok and not found

    def verdict(what, baseline, candidate):
        off = (candidate - baseline) / baseline
        within = abs(off) <= args.within
        print(f"candidate's {what} is {off * 100:+.2f}% of the baseline's "
              f"({'within' if within else 'OUTSIDE'} {args.within * 100:g}%)")
        return within

    ok = verdict("final loss", *finals) and ok
    if all(last_vals):
        ok = verdict("last validation loss", last_vals[0][1], last_vals[1][1]) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
