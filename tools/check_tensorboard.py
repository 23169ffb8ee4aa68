#!/usr/bin/env python3
"""Cross-checks a run's TensorBoard event files against its metrics.jsonl.

Loads <run dir>/tensorboard with TensorBoard's own reader (EventAccumulator,
which applies restarts as TensorBoard does) and checks that every numeric
field of every metrics record appears as its scalar at the record's step with
the same value (as float32), and that the resolved config is there as text.
Needs the `tensorboard` Python package (pip install tensorboard); not part of
`make test`, which reads the files back with its own reader.

usage: check_tensorboard.py RUN_DIR
"""
import json
import os
import struct
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    sys.exit("check_tensorboard.py: needs the tensorboard Python package (pip install tensorboard)")


def tag_of(record, key):
    """The scalar tag of a field: the rule of tensorboard/metrics_events.h."""
    if key.startswith("val_"):
        return "val/" + key[len("val_"):]
    return record.get("event", "train") + "/" + key


def as_float32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    run = sys.argv[1]
    accumulator = EventAccumulator(os.path.join(run, "tensorboard"),
                                   size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    scalars = {tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in tags["scalars"]}
    errors, checked = [], 0
    with open(os.path.join(run, "metrics.jsonl")) as lines:
        for line in lines:
            record = json.loads(line)
            if "step" not in record:
                continue
            for key, value in record.items():
                if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                tag, step = tag_of(record, key), record["step"]
                got = scalars.get(tag, {}).get(step)
                if got != as_float32(value):
                    errors.append(f"{tag} at step {step}: metrics.jsonl {value}, TensorBoard {got}")
                checked += 1
    if "config" not in tags["tensors"]:
        errors.append("no config text")
    for error in errors:
        print(f"check_tensorboard.py: {error}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"check_tensorboard.py: {run}: {checked} values in {len(scalars)} scalar series match "
          f"metrics.jsonl; config text present")


if __name__ == "__main__":
    main()
