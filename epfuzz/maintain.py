"""Corpus upkeep and crash triage: merge, prune (by coverage, via libFuzzer -merge=1), dedup.

Merge and prune never edit a corpus in place: the result is built in a fresh
folder and swapped in with renames, so an interruption leaves the old corpus.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from epfuzz import codec
from epfuzz.campaign import harness_path
from epfuzz.corpus import Case, case_paths, load_case, read_input, write_atomic
from epfuzz.errors import HarnessError, InputError
from epfuzz.findings import file_stem, signature
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Protocol
from epfuzz.scenario import Scenario


def _merge(harness: str, dest: Path, sources: list[Path]) -> None:
    script = harness_path(harness)
    p = subprocess.run([sys.executable, str(script), "-merge=1", str(dest), *map(str, sources)],
                       capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise HarnessError(f"libFuzzer -merge=1 failed for {harness}: {p.stderr.strip().splitlines()[-1:]}")


def merge(harness: str, dest: Path, sources: list[Path]) -> int:
    """Add to `dest` the inputs of `sources` that add coverage; returns how many were added."""
    for s in sources:
        if not s.is_dir():
            raise InputError(f"{s}: not a folder")
    dest.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in dest.iterdir()}
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        staged = Path(tmp) / "merged"
        shutil.copytree(dest, staged)
        _merge(harness, staged, sources)
        added = [p for p in staged.iterdir() if p.name not in before]
        for p in added:
            write_atomic(dest / p.name, p.read_bytes())
    return len(added)


def prune(harness: str, corpus: Path) -> tuple[int, int]:
    """Keep only inputs that add coverage; returns (before, after) file counts."""
    if not corpus.is_dir():
        raise InputError(f"{corpus}: not a folder")
    before = len([p for p in corpus.iterdir() if p.is_file()])
    parent = corpus.parent
    with tempfile.TemporaryDirectory(dir=parent) as tmp:
        fresh = Path(tmp) / "pruned"
        fresh.mkdir()
        _merge(harness, fresh, [corpus])
        old = Path(tmp) / "old"
        corpus.rename(old)           # two renames on one file system: never a half corpus
        fresh.rename(corpus)
    return before, len(list(corpus.iterdir()))


def triage(run_dir: Path, protocol: str | None, dest: Path | None, preset: str = "spec",
           backend: str = "sim") -> dict[str, list[Path]]:
    """Group a run's findings by signature; minimize one per group; keep it in `dest` if new there."""
    from epfuzz.backends import get_backend
    from epfuzz.minimize import minimize

    b = get_backend(backend)
    groups: dict[str, list[Path]] = defaultdict(list)
    scenarios: dict[str, tuple[Scenario, Protocol]] = {}
    for path in case_paths([run_dir]):
        try:
            if path.suffix == ".json":
                scn = load_case(path).scenario
            elif path.name.startswith("crash-") and protocol:
                scn = codec.decode(read_input(path), protocol, preset)
            else:
                continue
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            continue
        proto = get_protocol(scn.protocol)  # a run folder may hold several protocols' findings
        out = b.run(scn, proto)
        if out.violation is None:
            continue
        sig = signature(scn, out, proto)
        groups[sig].append(path)
        scenarios.setdefault(sig, (scn, proto))
    if dest is not None:
        known = set()
        for p in case_paths([dest]) if dest.is_dir() else []:
            try:
                known.add(load_case(p).signature)
            except InputError:
                continue
        for sig, (scn, proto) in scenarios.items():
            mz = minimize(scn, proto, backend=backend)
            m, out = mz.result, mz.outcome
            msig = signature(m, out, proto)
            if msig in known or sig in known:
                continue
            name = f"{file_stem(m.protocol)}-{hashlib.sha1(msig.encode()).hexdigest()[:10]}"
            case = Case(name, m, codec.encode(m), "finding", backend,
                        out.violation.summary() if out.violation else "", msig)
            write_atomic(dest / f"{name}.json", case.to_json().encode())
            known.add(msig)
    return dict(groups)
