#!/usr/bin/env python3
"""The GPU weak-outcome table (run on the GPU machine): path x fence x spin, weak outcomes per 100k rounds.

Writes JSON lines as it goes (so a cut-off run still leaves its rows) and a markdown
table at the end. Unfenced rows run 100k rounds; fenced rows run 1M rounds, the
bar the issue sets for "never".

    python bench/cuda_litmus.py --out litmus.jsonl [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from epfuzz.backends.cuda import CudaBackend  # noqa: E402
from epfuzz.scenario import Scenario  # noqa: E402

PATHS = ("same", "p2p", "host")
FENCES = ("none", "threadfence", "threadfence_system")
SPINS = (0, 2000)
BATCH = 20_000


#: message shapes: the research notes' 64K-word MP test, and the 70-word slot with an atomic
#: signal that the dispatch_any harness found weak on an H200 pair
SHAPES = {
    "mp-64k-words-flag": ({"kind": "write", "at_end_only": True}, {"num_tokens": 16, "hidden_bytes": 16384}),
    "slot-70-words-faa": ({"kind": "faa", "at_end_only": True},
                          {"num_tokens": 1, "hidden_bytes": 24, "meta_bytes": 256}),
}


def scenario(shape: str, path: str, fence: str, spin: int) -> Scenario:
    signal, payload = SHAPES[shape]
    return Scenario.from_dict({"protocol": "dispatch_any", "signal": signal, "payload": payload,
                               "gpu": {"path": path, "fence": fence, "store": "plain", "spin_cycles": spin}})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=400)
    ap.add_argument("--shape", choices=tuple(SHAPES), default="mp-64k-words-flag")
    a = ap.parse_args()
    b = CudaBackend()
    ok, why = b.availability()
    print(why, flush=True)
    if not ok:
        return 2
    start = time.monotonic()
    rows = []
    with open(a.out, "a") as out:
        for fence in FENCES:
            for path in PATHS:
                for spin in SPINS:
                    # the 1M-round bar for "never" where the unfenced run is weak: NVLink P2P
                    target = 1_000_000 if fence != "none" and path == "p2p" and spin == 0 else 100_000
                    scn = scenario(a.shape, path, fence, spin)
                    done = hits = words = 0
                    secs = 0.0
                    note = ""
                    while done < target and time.monotonic() - start < a.budget:
                        try:
                            o = b.run(scn, repeats=BATCH)
                        except Exception as e:  # noqa: BLE001 - recorded, the table goes on
                            note = str(e).splitlines()[0]
                            break
                        done += o.runs
                        hits += o.hits
                        words += o.extra.get("stale_words", 0)
                        secs += o.extra.get("seconds", 0.0)
                    row = {"shape": a.shape, "path": path, "fence": fence, "spin": spin, "rounds": done, "weak": hits,
                           "per_100k": round(hits * 100_000 / done, 1) if done else None, "stale_words": words,
                           "rounds_per_min": round(done / secs * 60) if secs else None, "note": note}
                    rows.append(row)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(row, flush=True)
    print("| path | fence | spin (cycles) | rounds | weak outcomes | per 100k | rounds/min |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['path']} | {r['fence']} | {r['spin']} | {r['rounds']} | {r['weak']} | {r['per_100k']} | "
              f"{r['rounds_per_min']} |" + (f" {r['note']}" if r["note"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
