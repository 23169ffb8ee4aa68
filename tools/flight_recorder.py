#!/usr/bin/env python3
"""Reads the flight recorder dumps of a failed job and says where its ranks diverged.

Each rank writes RUN_DIR/flight_recorder/rank_NNNNN.json when the watchdog
takes the job down, on a fatal error, or on SIGQUIT (docs/failure.md): its
groups (label, members as world ranks, collectives entered and completed) and
its last collectives and messages. For every group this prints, per member,
how far it got, and the first collective number the members disagree on: the
ranks that entered it, the ones that did not (behind), and any member whose
recorded operation at that number differs (a different op or size: a rank
that issued its collectives in another order). Members with no dump are
named: they were stopped, hung outside a collective, or lost.

    python3 tools/flight_recorder.py checkpoints/RUN            # the run directory
    python3 tools/flight_recorder.py checkpoints/RUN/flight_recorder
Exit status: 0 when the dumps show a divergence, 1 when they show none,
2 when there are no dumps.
"""
import argparse
import json
import pathlib
import sys


def load(directory: pathlib.Path) -> dict:
    if (directory / "flight_recorder").is_dir():
        directory = directory / "flight_recorder"
    dumps = {}
    for path in sorted(directory.glob("rank_*.json")):
        with open(path) as f:
            dump = json.load(f)
        dumps[dump["rank"]] = dump
    return dumps


def analyse(dumps: dict) -> list[str]:
    """One finding per line; empty when the ranks agree."""
    findings = []
    groups = {}  # (label, members) -> {rank: group entry}
    for rank, dump in dumps.items():
        for group in dump["groups"]:
            key = (group["label"], tuple(group["world_ranks"]))
            groups.setdefault(key, {})[rank] = group
    for (label, members), seen in sorted(groups.items()):
        if len(members) < 2:
            continue
        entered = {rank: group["collectives_entered"] for rank, group in seen.items()}
        silent = [rank for rank in members if rank not in dumps]
        if len(set(entered.values())) <= 1 and not silent and not mismatches(dumps, label, members):
            continue
        lines = [f"group {label} (ranks {', '.join(map(str, members))}):"]
        for rank in members:
            if rank in seen:
                g = seen[rank]
                lines.append(f"  rank {rank}: entered #{g['collectives_entered']}, "
                             f"completed #{g['collectives_completed']}")
            else:
                lines.append(f"  rank {rank}: no dump (stopped, hung outside a collective, or lost)")
        if len(set(entered.values())) > 1:
            first = min(entered.values()) + 1
            ahead = sorted(r for r, e in entered.items() if e >= first)
            behind = sorted(r for r, e in entered.items() if e < first)
            lines.append(f"  first divergence: #{first}, entered by rank(s) {', '.join(map(str, ahead))}, "
                         f"not by rank(s) {', '.join(map(str, behind))}: behind")
        for seq, ops in mismatches(dumps, label, members):
            shown = "; ".join(f"rank {r}: {op}" for r, op in sorted(ops.items()))
            lines.append(f"  #{seq} differs between ranks: {shown}")
        findings.extend(lines)
    return findings


def mismatches(dumps: dict, label: str, members: tuple) -> list[tuple[int, dict]]:
    """(seq, {rank: "op bytes"}) for the collectives whose recorded op or size differ."""
    by_seq = {}
    for rank in members:
        for entry in dumps.get(rank, {}).get("entries", []):
            if entry["group"] == label and entry["collective"]:
                by_seq.setdefault(entry["seq"], {})[rank] = f"{entry['op']} {entry['bytes']} B"
    return [(seq, ops) for seq, ops in sorted(by_seq.items()) if len(set(ops.values())) > 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="a run directory, or its flight_recorder directory")
    args = parser.parse_args()
    dumps = load(pathlib.Path(args.path))
    if not dumps:
        print(f"error: no rank_*.json under {args.path}", file=sys.stderr)
        return 2
    for rank, dump in sorted(dumps.items()):
        print(f"rank {rank}: {dump['reason']}")
    findings = analyse(dumps)
    print("\n".join(findings) if findings else "the ranks agree on every group")
    return 0 if findings else 1


if __name__ == "__main__":
    sys.exit(main())
