#!/usr/bin/env python3
"""Checks that the source folders stand on each other in one direction.

Each folder has a floor; a file may include headers from its own folder or a
lower floor, never from a higher one, and two folders on the same floor may not
include each other. Prints the include graph (one line per folder: what it
uses) with --graph; exits non-zero naming each offending include otherwise.
"""
import pathlib
import re
import sys

# Floor of each folder, ground floor first. model/kernels counts as model.
FLOORS = {
    # The host basics: errors, logs, files, RNG, number formats, system
    # facts, threads, signals' flag, child processes, exit statuses.
    "base": 0,
    # The collectives' interface (Group) with the watchdog and its flight
    # recorder, which every implementation and the model's tensor
    # parallelism share.
    "collectives": 1,
    "tensorboard": 1,
    "data": 1,
    # The device: arenas, device memory, the CUDA runtime and kernel helpers,
    # timelines (a device wait reports to the watchdog).
    "device": 2,
    # The config's keys, their rules and where each value came from.
    "schema": 3,
    "model": 4,
    "interop": 5,
    "parallel": 5,
    # The CUDA runtime and libraries as stand-ins (the emulation build): seen
    # by the CUDA sources only as <cuda_runtime.h> and the like, as the
    # vendor's; built on the CPU GEMM and bf16 rounding of the floors below.
    "cuda_emulation": 5,
    # Cost models: what a config needs and how fast it runs, before a launch.
    "cost_models": 6,
    # Sharded checkpoints: the engine's state on disk, and the run directory.
    "persistence": 6,
    "trainer": 7,
    # The subcommands beside ./train's training (bench, export, generate,
    # the scaling and calibration experiments, the supervisor): each drives
    # the floors below it; nothing below runs a command.
    "commands": 8,
}
SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh", ".cc"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path: str) -> str:
    return path.split("/", 1)[0]


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    uses = {folder: set() for folder in FLOORS}
    errors = []
    for folder in FLOORS:
        for file in sorted((root / folder).rglob("*")):
            if file.suffix not in SOURCE_SUFFIXES:
                continue
            relative = file.relative_to(root).as_posix()
            for included in INCLUDE.findall(file.read_text()):
                target = folder_of(included)
                if target not in FLOORS or target == folder:
                    continue
                uses[folder].add(target)
                if FLOORS[target] > FLOORS[folder]:
                    errors.append(f"{relative}: includes {included}, a higher floor ({target})")
                elif FLOORS[target] == FLOORS[folder]:
                    errors.append(f"{relative}: includes {included}, a folder on the same floor ({target})")
    if "--graph" in sys.argv:
        for folder in sorted(FLOORS, key=lambda f: (FLOORS[f], f)):
            used = sorted(uses[folder], key=lambda f: (FLOORS[f], f))
            print(f"{folder + '/':<13} uses {', '.join(u + '/' for u in used) or 'nothing of ours'}")
    for error in errors:
        print(f"layering: {error}", file=sys.stderr)
    if not errors:
        print(f"layering: {len(FLOORS)} folders, every include points down")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
