"""Raw findings as a campaign leaves them: one case file per raw signature, from seeded random inputs."""

from __future__ import annotations

import random
from pathlib import Path

from epfuzz.backends import get_backend
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.triage.findings import signature, write_finding


def raw_findings(folder: Path, protocol: str, count: int, seed: int = 0, preset: str = "spec",
                 max_tries: int = 20_000) -> list[Path]:
    """Up to `count` finding cases of `protocol`, each of its own raw signature, written to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    proto, sim = get_protocol(protocol), get_backend("sim")
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Path] = []
    for _ in range(max_tries):
        data = rng.randbytes(96)
        scn = codec.decode(data, protocol, preset)
        outcome = sim.run(scn, proto)
        if outcome.violation is None:
            continue
        sig = signature(scn, outcome, proto)
        if sig in seen:
            continue
        seen.add(sig)
        out.append(write_finding(folder, scn, data, outcome, proto))
        if len(out) == count:
            break
    return sorted(out)
