#!/usr/bin/env python3
"""The emulator's equivalence reference: what 10,000 fixed random scenarios do, in compact form.

Speed work on the `sim` emulator (issue 14) must not change the model. This script
decodes a fixed, seeded stream of random byte strings under every registered
protocol and every preset, simulates each, and records per scenario: the verdict,
the violation summary, the culprit rules, the rules fired, and a hash of
`SimRun.fingerprint()` (the whole trace: WRs, packet arrivals, TLP visibility
order, polls, verdict). `tests/sim/test_equivalence.py` runs the current code
against the committed file.

When the *model* changes on purpose (e.g. issue 18's responder fixes), regenerate
the reference from the merged model, before any further speed work:

    .venv/bin/python bench/equivalence.py --write            # tests/data/equivalence.json.gz
    .venv/bin/python bench/equivalence.py --check [--limit N] # compare the current code

The first COUNT rows' bytes come from one RNG seeded by SEED; their protocols went
round-robin over the protocols registered when the file was first written and their
presets per round, in PRESETS' order. The file is deterministic (gzip with mtime 0:
byte-identical on regeneration).

A protocol added later adds rows instead of moving the 10,000 (issue 30): each row names
its protocol and preset, the first COUNT rows keep the protocols they were written with,
and `--add` appends EXTRA rows for every registered protocol the file lacks, from a
stream of its own (seeded by SEED and the protocol's name, index "name:j"), so that two
branches adding protocols each append rows that do not depend on the other's, nor on
the order the protocols are registered or the branches merged. `--write` keeps the
file's cases (protocol, preset, bytes of every row) and records them again, then adds
rows for protocols the file lacks, so a deliberate model change never redraws them:

    .venv/bin/python bench/equivalence.py --add               # rows for new protocols only
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from epfuzz.cases.corpus import write_atomic  # noqa: E402
from epfuzz.encoding import codec  # noqa: E402
from epfuzz.infra.errors import EpfuzzError  # noqa: E402
from epfuzz.ir.presets import PRESETS  # noqa: E402
from epfuzz.protocols import BUILTIN, REGISTRY  # noqa: E402
from epfuzz.sim.engine import simulate  # noqa: E402

SEED = 14
COUNT = 10_000
MAX_BYTES = 128
EXTRA = 300
REFERENCE = ROOT / "tests" / "data" / "equivalence.json.gz"


def cases(count: int = COUNT, seed: int = SEED) -> Iterator[tuple[int, str, str, bytes]]:
    """(index, protocol, preset, bytes): protocols round-robin, presets per round, bytes from one RNG.
    The bytes are the reference's first COUNT rows'; the names are only theirs while the registry
    holds the protocols it held when the file was written (`all_cases` takes the names from the file)."""
    names = list(BUILTIN)
    presets = list(PRESETS)
    rng = random.Random(seed)
    for i in range(count):
        data = rng.randbytes(rng.randrange(0, MAX_BYTES + 1))
        yield i, names[i % len(names)], presets[(i // len(names)) % len(presets)], data


def added_cases(name: str, count: int = EXTRA, seed: int = SEED) -> Iterator[tuple[str, str, str, bytes]]:
    """("name:j", protocol, preset, bytes) of a protocol added after the first COUNT rows: its own stream."""
    presets = list(PRESETS)
    rng = random.Random(f"{seed}:{name}")
    for j in range(count):
        yield f"{name}:{j}", name, presets[j % len(presets)], rng.randbytes(rng.randrange(0, MAX_BYTES + 1))


def all_cases(ref: list[list[Any]]) -> Iterator[tuple[Any, str, str, bytes]]:
    """The case of every reference row: the main stream for the first COUNT, each added protocol's after."""
    main = cases(COUNT)
    added: dict[str, Iterator[tuple[str, str, str, bytes]]] = {}
    for row in ref:
        if isinstance(row[0], int):
            i, _, _, data = next(main)  # the bytes do not depend on the registry; the names do
            yield i, row[1], row[2], data  # the protocol and preset the row was written with
        else:  # the bytes of the protocol's own stream; the preset the row was written with (a later preset
            name = row[1]  # in PRESETS must not move the old rows' presets)
            j, _, _, data = next(added.setdefault(name, added_cases(name)))
            yield j, name, row[2], data


def trace_hash(fp: tuple[object, ...]) -> str:
    """A short hash of a fingerprint; enums serialise as their integer values, so data types may change."""
    return hashlib.sha256(json.dumps(fp, separators=(",", ":")).encode()).hexdigest()[:12]


def record(protocol: str, preset: str, data: bytes) -> list[Any]:
    """[verdict, summary, culprit rules, rules fired, trace hash] of one scenario (an error: its type)."""
    try:
        scn = codec.decode(data, protocol, preset)
        run = simulate(scn, REGISTRY.get(protocol))
    except EpfuzzError as e:
        return ["error", type(e).__name__, [], [], ""]
    v = run.violation
    return ["ok" if v is None else v.kind, "" if v is None else v.summary(), sorted(run.culprit_rules()),
            sorted(run.rules_fired), trace_hash(run.fingerprint())]


def compute(count: int = COUNT) -> list[list[Any]]:
    """A first reference (no file yet): `count` rows of the main stream under the current registry."""
    return [[i, proto, preset, *record(proto, preset, data)] for i, proto, preset, data in cases(count)]


def rerecord(ref: list[list[Any]]) -> list[list[Any]]:
    """Every row of `ref` recorded again under the current code: the same cases, new records."""
    return [[i, proto, preset, *record(proto, preset, data)] for i, proto, preset, data in all_cases(ref)]


def add_rows(ref: list[list[Any]]) -> tuple[list[list[Any]], list[str]]:
    """`ref` with EXTRA rows appended for each registered protocol it has none of (registration order)."""
    have = {r[1] for r in ref}
    new = [n for n in BUILTIN if n not in have]
    return ref + [[i, proto, preset, *record(proto, preset, data)]
                  for n in new for i, proto, preset, data in added_cases(n)], new


def write(rows: list[list[Any]], path: Path = REFERENCE) -> None:
    """Compressed in memory, then written whole and renamed: a cut run leaves the old reference. The gzip
    header names the file as writing it in place did (`filename`), so regenerating it is byte-identical."""
    body = "\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n"
    buf = io.BytesIO()
    with gzip.GzipFile(filename=str(path), fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(body.encode())
    write_atomic(path, buf.getvalue())


def load(path: Path = REFERENCE) -> list[list[Any]]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def mismatches(limit: int | None = None, path: Path = REFERENCE, start: int = 0) -> tuple[int, list[str]]:
    """(scenarios checked, one line per scenario whose record differs from the reference): rows
    [start, start + limit) of the file (all from `start` without a limit)."""
    ref = load(path)
    end = len(ref) if limit is None else start + limit
    bad = []
    for k, (row, (i, proto, preset, data)) in enumerate(zip(ref[:end], all_cases(ref[:end]))):
        if k < start:
            continue
        if row[:3] != [i, proto, preset]:
            raise SystemExit(f"reference row {row[:3]} is not case {i} {proto}/{preset}: regenerate it (--write)")
        got = record(proto, preset, data)
        if got != row[3:]:
            bad.append(f"#{i} {proto}/{preset} {data.hex()}: want {row[3:]} got {got}")
    return len(ref[start:end]), bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="regenerate the reference file")
    ap.add_argument("--check", action="store_true", help="compare the current code with the reference")
    ap.add_argument("--add", action="store_true", help="append rows for registered protocols the file lacks")
    ap.add_argument("--limit", type=int, default=None, help="check only the first N scenarios")
    a = ap.parse_args()
    t0 = time.process_time()
    if a.write:
        rows, _ = add_rows(rerecord(load()) if REFERENCE.exists() else compute())
        write(rows)
        print(f"wrote {len(rows)} scenarios to {REFERENCE} in {time.process_time() - t0:.1f} s CPU")
        return 0
    if a.add:
        ref = load()
        rows, new = add_rows(ref)
        write(rows)
        print(f"added {len(rows) - len(ref)} rows for {', '.join(new) or 'no new protocol'} to {REFERENCE}")
        return 0
    n, bad = mismatches(a.limit)
    for line in bad[:20]:
        print(line)
    print(f"{n - len(bad)}/{n} scenarios agree with {REFERENCE.name} ({time.process_time() - t0:.1f} s CPU)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
