"""`epfuzz list`: what this install can fuzz (harnesses, protocols, presets with the knobs each pins, backends)."""

from __future__ import annotations

import argparse

from epfuzz.backends import NAMES as BACKENDS
from epfuzz.backends import get_backend
from epfuzz.cli.guard import EXIT_CLEAN
from epfuzz.infra.shipped import carried
from epfuzz.ir import preset_knobs
from epfuzz.protocols import REGISTRY


def cmd_list(a: argparse.Namespace) -> int:
    from epfuzz.continuous.targets import harness_names

    if a.presets:  # each platform knob, pinned (its value) or free, per preset: read from PRESETS
        print(*preset_knobs.table(), sep="\n")
        return EXIT_CLEAN
    print("harnesses:")
    for h in harness_names():
        print(f"  {h}")
    print("protocols:")
    for name, p in REGISTRY.items.items():
        home = "" if p.home_preset == "spec" else f" (fuzzed under {p.home_preset})"
        print(f"  {name} [{p.expected() or 'depends on the scenario'}]{home} {p.doc}")
    print("presets (`epfuzz list --presets`: each knob's value or the values fuzzed):", *preset_knobs.section(),
          sep="\n")
    print("backends:")
    for b in BACKENDS:
        ok, why = get_backend(b, require=False).availability()
        print(f"  {b}: {'available' if ok else 'unavailable'}: {why}")
    print("files this install carries:", *carried(), sep="\n  ")  # a pip user has no checkout to look in
    return EXIT_CLEAN
