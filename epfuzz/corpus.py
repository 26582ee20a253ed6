"""Corpus and regression files: atomic writes, strict reads, one-line errors.

Everything that lands on disk goes through `write_atomic` (temp file in the same
folder, fsync, rename), so an interrupted run leaves either the old file or the
new one, never half of one. Reading never modifies anything under corpus/.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epfuzz import codec
from epfuzz.errors import InputError
from epfuzz.scenario import Scenario

MAX_INPUT_BYTES = 4096          # libFuzzer's default -max_len
MAX_CASE_BYTES = 1 << 20
CASE_SUFFIX = ".json"


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


@dataclass(frozen=True)
class Case:
    """A kept finding (or a pinned clean result), replayed in CI."""

    name: str
    scenario: Scenario
    input: bytes
    expect: str                # "finding" | "clean"
    backend: str = "sim"
    note: str = ""
    signature: str = ""

    def to_json(self) -> str:
        return json.dumps({
            "name": self.name, "protocol": self.scenario.protocol, "preset": self.scenario.preset,
            "backend": self.backend, "expect": self.expect, "signature": self.signature, "note": self.note,
            "input": self.input.hex(), "scenario": self.scenario.to_dict(),
        }, indent=2) + "\n"


def read_input(path: Path) -> bytes:
    """A raw fuzz input file, size-checked."""
    try:
        size = path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise InputError(f"{path}: {size} bytes is over the {MAX_INPUT_BYTES}-byte input limit")
        return path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None


def load_case(path: Path) -> Case:
    try:
        size = path.stat().st_size
        if size > MAX_CASE_BYTES:
            raise InputError(f"{path}: {size} bytes is over the {MAX_CASE_BYTES}-byte case limit")
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if not raw.strip():
        raise InputError(f"{path}: empty file")
    try:
        obj: Any = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: expected a JSON object")
    try:
        if "scenario" not in obj:  # a bare scenario file
            return Case(path.stem, codec.load_dict(obj), b"", "", "sim")
        scn = codec.load_dict(obj["scenario"])
        expect = obj.get("expect", "")
        if expect not in ("finding", "clean"):
            raise InputError(f"{path}: 'expect' must be \"finding\" or \"clean\", got {expect!r}")
        data = bytes.fromhex(obj.get("input", ""))
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    except ValueError as e:
        raise InputError(f"{path}: bad 'input' hex ({e})") from None
    if data and codec.decode(data, scn.protocol, scn.preset) != scn:
        raise InputError(f"{path}: 'input' bytes do not decode to 'scenario' (stale case?)")
    return Case(obj.get("name", path.stem), scn, data, expect, obj.get("backend", "sim"),
                obj.get("note", ""), obj.get("signature", ""))


def case_paths(paths: list[Path]) -> list[Path]:
    """Expand folders into their files (sorted, hidden and temp files skipped)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith("."))
        else:
            out.append(p)
    return out
