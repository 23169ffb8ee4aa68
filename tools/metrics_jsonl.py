"""Reads a run's metrics.jsonl: the step records (training loss and the
rest) and the validation points, for tools/plot_metrics.py and
tools/gpu_kit/compare_losses.py. Event records ({"event": ...}) are skipped,
and so is a line cut off by a killed run."""
import json
import os
import sys


def read_run(run):
    """(name, {step: train record}, {step: val_loss}) of a run directory or file."""
    path = run if run.endswith(".jsonl") else os.path.join(run, "metrics.jsonl")
    if not os.path.isfile(path):
        sys.exit(f"{os.path.basename(sys.argv[0])}: {path}: no such file (is {run} a run directory?)")
    train, val = {}, {}
    with open(path) as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut off by a killed run
            if "event" in record or "step" not in record:
                continue
            if "loss" in record:
                train[record["step"]] = record
            if "val_loss" in record:
                val[record["step"]] = record["val_loss"]
    if not train and not val:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {path}: no loss records")
    directory = os.path.dirname(os.path.abspath(path))
    return os.path.basename(directory), train, val
