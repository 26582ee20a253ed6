"""Corpus upkeep: merge, prune (by coverage, via libFuzzer -merge=1), dedup (triage: `epfuzz.triage.run`).

Merge and prune never edit a corpus in place: the result is built in a fresh
folder and swapped in with renames, so an interruption leaves the old corpus.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from epfuzz import codec
from epfuzz.campaign_common import harness_path
from epfuzz.corpus import read_input, sha1, write_atomic
from epfuzz.errors import HarnessError, InputError
from epfuzz.findings import signature
from epfuzz.protocols import REGISTRY, get_protocol


def _merge(harness: str, dest: Path, sources: list[Path], scratch: Path) -> None:
    """libFuzzer -merge=1, run inside `scratch`: its crash-* artifacts and the harness's finding cases
    land there, not in the user's working directory; --keep-going so a finding does not abort it."""
    script = harness_path(harness)
    env = {**os.environ, "EPFUZZ_FINDINGS_DIR": str(scratch), "EPFUZZ_KEEP_GOING": "1"}
    p = subprocess.run([sys.executable, str(script), "-merge=1", f"-artifact_prefix={scratch}/", "--keep-going",
                        f"--findings-dir={scratch}", str(dest.resolve()), *(str(s.resolve()) for s in sources)],
                       capture_output=True, text=True, timeout=3600, cwd=scratch, env=env)
    if p.returncode != 0:
        raise HarnessError(f"libFuzzer -merge=1 failed for {harness}: {p.stderr.strip().splitlines()[-1:]}")


def finding_inputs(harness: str, files: list[Path], preset: str = "spec") -> dict[str, list[Path]]:
    """The inputs among `files` that trigger a finding on sim, by raw signature: coverage alone
    would drop them (they add no edge the clean inputs lack), yet they are a corpus's best part."""
    from epfuzz.backends import get_backend

    protocol = harness.removesuffix(".py").removesuffix("_fuzzer")
    if protocol not in REGISTRY.items:
        return {}
    sim = get_backend("sim")
    proto = get_protocol(protocol)
    out: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        try:
            scn = codec.decode(read_input(f), protocol, preset)
        except InputError:
            continue
        o = sim.run(scn, proto)
        if o.violation is not None:
            out[signature(scn, o, proto)].append(f)
    return dict(out)


def merge(harness: str, dest: Path, sources: list[Path]) -> int:
    """Add to `dest` the inputs of `sources` that add coverage, and one input per finding signature
    that `dest` lacks; returns how many were added."""
    for s in sources:
        if not s.is_dir():
            raise InputError(f"{s}: not a folder")
    dest.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in dest.iterdir()}
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        staged = Path(tmp) / "merged"
        shutil.copytree(dest, staged)
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        _merge(harness, staged, sources, scratch)
        have = finding_inputs(harness, [p for p in staged.iterdir() if p.is_file()])
        for sig, files in finding_inputs(harness, [f for s in sources for f in s.iterdir() if f.is_file()]).items():
            if sig not in have:
                shutil.copyfile(files[0], staged / sha1(files[0].read_bytes()))
        added = [p for p in staged.iterdir() if p.name not in before]
        for p in added:
            write_atomic(dest / p.name, p.read_bytes())
    return len(added)


def prune(harness: str, corpus: Path) -> tuple[int, int]:
    """Keep the inputs that add coverage and every input that triggers a finding; (before, after) counts."""
    if not corpus.is_dir():
        raise InputError(f"{corpus}: not a folder")
    files = [p for p in corpus.iterdir() if p.is_file()]
    parent = corpus.parent
    with tempfile.TemporaryDirectory(dir=parent) as tmp:
        fresh = Path(tmp) / "pruned"
        fresh.mkdir()
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        _merge(harness, fresh, [corpus], scratch)
        for group in finding_inputs(harness, files).values():
            for f in group:
                if not (fresh / f.name).exists():
                    shutil.copyfile(f, fresh / f.name)
        old = Path(tmp) / "old"
        corpus.rename(old)           # two renames on one file system: never a half corpus
        fresh.rename(corpus)
    return len(files), len(list(corpus.iterdir()))
