#!/usr/bin/env python3
"""The GPU weak-outcome table (run on the GPU machine): path x fence x spin x launch skew.

One command measures the whole table (device time is scarce): rows run in priority
order -- unfenced rows first (100k rounds), then the fenced ones to 1M rounds, the
issue's bar for "never" -- each under a time cap, the whole under a budget. Every
row is appended to a JSON-lines file as it finishes, so a cut-off run keeps what it
measured; the markdown table is written at the end.

    python bench/cuda_litmus.py --out bench/cuda/litmus.jsonl [--budget S] [--row-cap S] [--shape NAME ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from epfuzz.backends.cuda import CudaBackend  # noqa: E402
from epfuzz.cases.corpus import write_atomic  # noqa: E402
from epfuzz.encoding import codec  # noqa: E402
from epfuzz.infra.errors import Unsupported  # noqa: E402
from epfuzz.ir.scenario import Scenario  # noqa: E402
from epfuzz.protocols import get_protocol  # noqa: E402

PATHS = ("same", "p2p", "host")
DISPATCH_ANY = get_protocol("dispatch_any")  # the protocol of every scenario() here
FENCES = ("none", "threadfence", "threadfence_system")
SPIN = 2000
SKEW = 1 << 16  # cycles of torch's sleep kernel before every launch of 10 rounds
STRESS = 7  # incantation CTAs: memory traffic into the consumer's memory while the producer runs
BATCH = 50_000
NEVER = 1_000_000  # rounds a fenced row needs before its zero means something
WEAK = 100_000

#: message shapes: the research notes' 64K-word MP test; a 70-word slot (DeepEP's smallest token) with an
#: atomic signal, which the dispatch_any harness found weak over NVLink; the same slot with a flag store,
#: the form host-mapped memory can run (this host has no native host atomics)
SHAPES = {
    "mp-64k-words-flag": ({"kind": "write", "at_end_only": True}, {"num_tokens": 16, "hidden_bytes": 16384}),
    "slot-70-words-faa": ({"kind": "faa", "at_end_only": True},
                          {"num_tokens": 1, "hidden_bytes": 24, "meta_bytes": 256}),
    "slot-70-words-flag": ({"kind": "write", "at_end_only": True},
                           {"num_tokens": 1, "hidden_bytes": 24, "meta_bytes": 256}),
}


def scenario(shape: str, path: str, fence: str, spin: int = 0, skew: int = 0, skew_consumer: bool = False,
             incant: int = 0, store: str = "plain") -> Scenario:
    signal, payload = SHAPES[shape]
    gpu = {"path": path, "fence": fence, "store": store, "spin_cycles": spin, "incantations": incant}
    if skew:
        gpu |= {"launch_rounds": 10, "launch_skew": skew, "skew_consumer": skew_consumer}
    return codec.load_dict({"protocol": "dispatch_any", "signal": signal, "payload": payload, "gpu": gpu})


GROUPS = ("base", "fenced", "delay", "stress", "store")


def plan(shapes: list[str], groups: tuple[str, ...] = GROUPS) -> list[dict]:
    """Rows in the order they are worth device time: what can be weak, then the fenced zeros, then
    delays, then the fenced zeros again under memory stress (incantation CTAs)."""
    rows = []
    row = {"spin": 0, "skew": 0, "incant": 0}
    if "base" in groups:
        rows += [{**row, "shape": sh, "path": p, "fence": "none", "target": WEAK} for sh in shapes for p in PATHS]
    if "fenced" in groups:
        rows += [{**row, "shape": sh, "path": p, "fence": f, "target": NEVER}
                 for sh in shapes for p in PATHS for f in FENCES[1:]]
    if "delay" in groups:
        for sh in shapes:
            for p in PATHS:
                rows.append({**row, "shape": sh, "path": p, "fence": "none", "spin": SPIN, "target": WEAK})
                rows += [{**row, "shape": sh, "path": p, "fence": "none", "skew": SKEW, "skewed": side, "target": WEAK}
                         for side in ("producer", "consumer")]
    if "stress" in groups:
        rows += [{**row, "shape": sh, "path": p, "fence": "none", "incant": STRESS, "target": WEAK}
                 for sh in shapes for p in PATHS]
        rows += [{**row, "shape": sh, "path": p, "fence": f, "incant": STRESS, "target": NEVER}
                 for sh in shapes for p in PATHS for f in FENCES[1:]]
    if "store" in groups:  # the flag store's own semantics, no fence, under stress: volatile vs st.release.sys
        rows += [{**row, "shape": sh, "path": p, "fence": "none", "incant": STRESS, "store": st,
                  "target": NEVER if st == "release_sys" else WEAK}
                 for st in ("volatile", "release_sys") for sh in shapes if SHAPES[sh][0]["kind"] != "faa"
                 for p in PATHS]
    return rows


def measure(b: CudaBackend, row: dict, cap: float, deadline: float) -> dict:
    scn = scenario(row["shape"], row["path"], row["fence"], row["spin"], row["skew"], row.get("skewed") == "consumer",
                   row.get("incant", 0), row.get("store", "plain"))
    done = hits = words = 0
    secs = 0.0
    first: list[int] = []
    note = ""
    start = time.monotonic()
    while done < row["target"]:
        now = time.monotonic()
        if now - start > cap or now > deadline:
            note = "time cap"
            break
        try:
            o = b.run_litmus(scn, repeats=min(BATCH, row["target"] - done))
        except Unsupported as e:
            note = str(e).split(": ", 1)[-1].split(",")[0]
            break
        except Exception as e:  # noqa: BLE001 - recorded, the table goes on
            note = str(e).splitlines()[0]
            break
        if o.violation is not None and o.violation.kind == "hang":
            note = o.summary
            break
        first += [done + i for i in o.extra.get("first_weak_rounds", [])][: 16 - len(first)]
        done += o.runs
        hits += o.hits
        words += o.extra.get("stale_words", 0)
        secs += o.extra.get("seconds", 0.0)
    return {**row, "rounds": done, "weak": hits, "per_100k": round(hits * 100_000 / done, 2) if done else None,
            "stale_words": words, "rounds_per_min": round(done / secs * 60) if secs else None,
            "first_weak_rounds": first, "note": note}


def cold_study(b: CudaBackend, runs: int, rounds: int) -> list[dict]:
    """Where the weak rounds fall: `runs` runs of `rounds` rounds on NVLink without a fence, with
    torch's cached buffers reused (warm) and with new buffers mapped for every run (cold)."""
    rows = []
    for shape in SHAPES:
        for fresh in (False, True):
            scn = scenario(shape, "p2p", "none").with_path("gpu.fresh_buffers", fresh)
            weak_runs = weak = 0
            at: list[int] = []
            for _ in range(runs):
                o = b.run_litmus(scn, repeats=rounds)
                weak_runs += o.hits > 0
                weak += o.hits
                at += o.extra.get("first_weak_rounds", [])
            rows.append({"study": "cold", "shape": shape, "fresh_buffers": fresh, "runs": runs, "rounds": runs * rounds,
                         "weak_runs": weak_runs, "weak": weak, "weak_at_rounds": sorted(set(at))[:32]})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| message | flag store | path | fence | spin / launch skew / stress | rounds | weak | per 100k | "
           "rounds/min | note |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    stores = ("plain", "volatile", "release_sys")
    for r in sorted(rows, key=lambda r: (list(SHAPES).index(r["shape"]), stores.index(r.get("store", "plain")),
                                         r.get("incant", 0), r["skew"] > 0, r["spin"], FENCES.index(r["fence"]),
                                         PATHS.index(r["path"]))):
        delay = (f"skew {r['skew']} ({r['skewed']})" if r["skew"] else f"spin {r['spin']}" if r["spin"]
                 else f"{r['incant']} traffic CTAs" if r.get("incant") else "-")
        rpm = f"{r['rounds_per_min']:,}" if r["rounds_per_min"] else "-"
        store = "(atomic)" if SHAPES[r["shape"]][0]["kind"] == "faa" else r.get("store", "plain")
        out.append(f"| {r['shape']} | {store} | {r['path']} | {r['fence']} | {delay} | {r['rounds']:,} | {r['weak']} | "
                   f"{r['per_100k'] if r['per_100k'] is not None else '-'} | {rpm} | {r['note']} |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file (appended); the table goes beside it as .md")
    ap.add_argument("--budget", type=float, default=480, help="seconds for the whole table")
    ap.add_argument("--row-cap", type=float, default=45, help="seconds for any one row")
    ap.add_argument("--shape", action="append", choices=tuple(SHAPES), help="default: all")
    ap.add_argument("--group", action="append", choices=GROUPS, help="row groups (default: all)")
    ap.add_argument("--merge", action="append", default=[], help="earlier JSON-lines files to put in the table too")
    ap.add_argument("--cold-study", type=int, metavar="RUNS", help="only the warm/cold study, RUNS runs per row")
    a = ap.parse_args()
    b = CudaBackend()
    ok, why = b.availability()
    print(why, flush=True)
    if not ok:
        return 2
    if a.cold_study:
        with Path(a.out).open("a") as f:
            for r in cold_study(b, a.cold_study, 5000):
                f.write(json.dumps(r) + "\n")
        return 0
    # builds the kernels outside any row's cap
    b.run_litmus(scenario("slot-70-words-flag", "same", "none"), repeats=2000)
    deadline = time.monotonic() + a.budget
    rows = []
    out = Path(a.out)
    with out.open("a") as f:
        for row in plan(a.shape or list(SHAPES), tuple(a.group or GROUPS)):
            if time.monotonic() > deadline:
                break
            r = measure(b, row, a.row_cap, deadline)
            rows.append(r)
            f.write(json.dumps(r) + "\n")
            f.flush()
            print(json.dumps(r), flush=True)
    for m in a.merge:
        rows += [json.loads(line) for line in Path(m).read_text().splitlines() if line.strip()]
    table = markdown(rows)
    write_atomic(out.with_suffix(".md"), table.encode())
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
