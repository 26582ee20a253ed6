"""What a finding is on disk and on screen: a signature, files, and a replay command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from epfuzz.backends import get_backend
from epfuzz.backends.base import Outcome
from epfuzz.corpus import Case, write_atomic
from epfuzz.protocols.base import Protocol
from epfuzz.scenario import Scenario


def signature(scn: Scenario, outcome: Outcome, proto: Protocol) -> str:
    """Findings with the same protocol, preset, kind, culprit rule cells and knob set are one bug;
    the backend that found it says which scenario fields make up the knob set."""
    v = outcome.violation
    kind = v.kind if v else "clean"
    names = get_backend(outcome.backend, require=False).signature_fields(proto)
    knobs = ",".join(f"{k.split('.')[-1]}={scn.get_path(k)}" for k in names)
    rules = "+".join(sorted(outcome.rules_fired)) or "in-order"
    return f"{scn.protocol}|{scn.preset}|{kind}|{rules}|{knobs}"


def replay_command(path: Path, backend: str = "sim") -> str:
    extra = "" if backend == "sim" else f" --backend {backend}"
    return f"epfuzz run {shlex.quote(str(path))}{extra}"


def file_stem(protocol: str) -> str:
    """A protocol name fit for a file name (plug-ins are module:Attr)."""
    return "".join(ch if ch.isalnum() or ch in "._-" else "." for ch in protocol)


def write_finding(folder: Path, scn: Scenario, data: bytes, outcome: Outcome, proto: Protocol) -> Path:
    """Write the finding as a regression case (JSON with scenario and input bytes)."""
    sig = signature(scn, outcome, proto)
    stem = file_stem(scn.protocol)
    case = Case(f"{stem}-{scn.digest()}", scn, data, "finding", outcome.backend,
                outcome.violation.summary() if outcome.violation else "", sig)
    path = folder / f"finding-{stem}-{scn.digest()}.json"
    write_atomic(path, case.to_json().encode())
    return path


def one_line_json(scn: Scenario) -> str:
    return json.dumps(scn.to_dict(), separators=(",", ":"))
