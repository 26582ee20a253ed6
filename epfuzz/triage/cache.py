"""Root causes remembered across runs of the same harness: a finding grouped once is not grouped again.

A campaign of one harness rediscovers the same raw findings run after run (the same seeds, the same
early mutations), and `epfuzz triage` re-reads a run folder that its campaign grouped already. The
root cause is a function of the finding and of the code (the model, the protocol, the minimizer),
so an entry is keyed by the raw scenario's digest and the file by a fingerprint of that code:
editing any epfuzz source or the plug-in's module starts a new file. It is only a shortcut:
a missing, unreadable or foreign file is an empty cache, and a lost write loses time, not results.

Where: `$EPFUZZ_CACHE_DIR/triage/`, else `$XDG_CACHE_HOME/epfuzz/triage/`, else
`~/.cache/epfuzz/triage/`; one JSON file per (protocol, preset, backend), at most `MAX_ENTRIES`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

#: entries kept per file; the oldest go first (a campaign's findings come in bursts)
MAX_ENTRIES = 20_000
_fingerprints: dict[str, str] = {}


def cache_dir() -> Path:
    base = os.environ.get("EPFUZZ_CACHE_DIR")
    if base:
        return Path(base) / "triage"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "epfuzz" / "triage"


def fingerprint(proto: object) -> str:
    """A digest of the code a root cause depends on: every epfuzz source file, and the file of the
    protocol's module where it is a plug-in's."""
    module = sys.modules.get(type(proto).__module__)
    extra = getattr(module, "__file__", None) if not type(proto).__module__.startswith("epfuzz.") else None
    key = str(extra)
    if key not in _fingerprints:
        h = hashlib.sha1()
        root = Path(__file__).resolve().parents[1]
        files = sorted(root.rglob("*.py")) + ([Path(extra)] if extra else [])
        for f in files:
            h.update(str(f.relative_to(root) if f.is_relative_to(root) else f.name).encode())
            try:
                h.update(f.read_bytes())
            except OSError:
                h.update(b"?")
        _fingerprints[key] = h.hexdigest()[:16]
    return _fingerprints[key]


class CauseCache:
    """raw scenario digest -> {"cause", "scenario" (the minimized one, JSON), "note"}."""

    def __init__(self, protocol: str, preset: str, backend: str, proto: object, enabled: bool = True) -> None:
        from epfuzz.cases.corpus import file_stem

        self.path = cache_dir() / f"{file_stem(protocol)}-{file_stem(preset)}-{backend}.json"
        self.print = fingerprint(proto)
        self.enabled = enabled
        self.entries: dict[str, dict[str, Any]] = {}
        self.dirty = False
        if enabled:
            self._load()

    def _load(self) -> None:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        if isinstance(doc, dict) and doc.get("fingerprint") == self.print and isinstance(doc.get("entries"), dict):
            self.entries = {k: v for k, v in doc["entries"].items() if isinstance(v, dict)}

    def get(self, digest: str) -> dict[str, Any] | None:
        return self.entries.get(digest) if self.enabled else None

    def put(self, digest: str, entry: dict[str, Any]) -> None:
        if self.enabled:
            self.entries.pop(digest, None)
            self.entries[digest] = entry
            self.dirty = True

    def save(self) -> None:
        """Write the file atomically (kept within MAX_ENTRIES); a write that fails is left out."""
        if not (self.enabled and self.dirty):
            return
        from epfuzz.cases.corpus import write_atomic

        keep = dict(list(self.entries.items())[-MAX_ENTRIES:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps({"fingerprint": self.print, "entries": keep},
                                               separators=(",", ":")).encode())
            self.dirty = False
        except OSError:
            pass
