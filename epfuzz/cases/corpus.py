"""Corpus and regression files: atomic writes, strict reads, one-line errors.

Everything that lands on disk goes through `write_atomic` (temp file in the same
folder, fsync, rename), so an interrupted run leaves either the old file or the
new one, never half of one. Reading never modifies anything under corpus/.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epfuzz.backends import NAMES as BACKEND_NAMES
from epfuzz.cases.agree import agree_first
from epfuzz.encoding import codec
from epfuzz.infra.errors import InputError
from epfuzz.infra.shipped import missing
from epfuzz.ir.scenario import Scenario

MAX_INPUT_BYTES = 4096          # libFuzzer's default -max_len
#: how libFuzzer names a corpus entry: the SHA-1 of its content
LIBFUZZER_SHA1 = re.compile(r"[0-9a-f]{40}")
MAX_CASE_BYTES = 1 << 20
CASE_SUFFIX = ".json"


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: set it straight back, once, at import
    os.umask(mask)          # (not per write: the process-wide mask would flicker under other threads)
    return mask


_UMASK = _umask()


def write_atomic(path: Path, data: bytes, replace: bool = True) -> None:
    """Write through a temporary file and a rename, so a reader never sees half a file. The file gets
    the mode an ordinary write would (0666 less the umask): mkstemp's private 0600 made cases unreadable
    to the other users of a shared run or corpus folder. A full disk is `NoSpace` (exit 2), not a traceback.
    With `replace=False` an existing `path` is `Exists` and stays as it was: the temporary file
    is hard-linked into place, which fails if `path` appeared meanwhile (a check, then a rename, would
    clobber a file made between the two)."""
    from epfuzz.infra.diskspace import NO_ROOM, NoSpace

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as e:
        if e.errno in NO_ROOM:
            raise NoSpace(path, e) from None
        if e.filename not in (None, str(path.parent)):  # mkstemp's own name (`.m.json.tv9itn_d`), which the
            raise type(e)(e.errno, e.strerror, str(path)) from None  # user never gave: say the file asked for
        raise
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in NO_ROOM:
            raise NoSpace(path, e) from None
        raise


class Exists(FileExistsError):
    """`write_atomic(replace=False)` found `path` taken; a FileExistsError of its own, so that a caller
    tells it from the one `mkdir` raises for a parent that is a file (that is a path it cannot write)."""


def _link_new(tmp: str, path: Path) -> None:
    """Put the finished `tmp` at `path` only if nothing is there (`Exists` if something is)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise Exists(errno.EEXIST, "File exists", str(path)) from None
    except OSError:  # a file system without hard links: the check and the rename, as close as it gets
        if os.path.lexists(path):
            raise Exists(errno.EEXIST, "File exists", str(path)) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


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


def read_bounded(path: Path, limit: int, what: str = "input", over: bool = False) -> bytes:
    """At most `limit` + 1 bytes of a file, a pipe, a device or stdin (`-`); more than `limit` is an
    `InputError` unless `over` (the caller says what the bytes past it mean).

    `st_size` is 0 for /dev/zero and pipes, so only reading with a cap bounds memory;
    the whole file is read once so that a pipe is not consumed by a format sniff.
    """
    try:
        if str(path) == "-":
            data = sys.stdin.buffer.read(limit + 1)
        elif path.is_fifo():
            data = _read_fifo(path, limit + 1)
        else:
            with path.open("rb") as f:
                data = f.read(limit + 1)
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a file", path=path) from None
    except OSError as e:
        where = missing(path) if isinstance(e, FileNotFoundError) else ""
        raise InputError(f"{path}: cannot read: {e.strerror}{where}", path=path) from None
    if len(data) > limit and not over:
        raise InputError(f"{path}: more than {limit} bytes, over the {limit}-byte {what} limit", path=path)
    return data


#: how long a named FIFO may go without a writer before reading it is given up (an `open` of one
#: with no writer blocked forever); in steps of FIFO_POLL_S
FIFO_WAIT_S, FIFO_POLL_S = 10.0, 0.1


def _read_fifo(path: Path, limit: int) -> bytes:
    """Up to `limit` bytes of a named FIFO: opened without blocking, read until its writer closes it
    (or the limit); FIFO_WAIT_S without a byte (no writer, or a stalled one) is an `InputError`."""
    import select

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        chunks: list[bytes] = []
        got = 0
        waited = 0.0
        while got < limit:
            if not poller.poll(int(FIFO_POLL_S * 1000)):  # no writer yet, or one that stopped writing
                waited += FIFO_POLL_S
                if waited >= FIFO_WAIT_S:
                    raise InputError(f"{path}: a FIFO no one writes to (nothing for {FIFO_WAIT_S:g} s)", path=path)
                continue
            waited = 0.0
            try:
                chunk = os.read(fd, min(65536, limit - got))
            except BlockingIOError:
                continue
            if not chunk:  # its writer closed it
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_input(path: Path) -> bytes:
    """A raw fuzz input file, size-checked."""
    return read_bounded(path, MAX_INPUT_BYTES)


def _json_object(raw: bytes, where: str) -> dict[str, Any]:
    try:
        obj: Any = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{where}: not valid JSON ({e})", path=where) from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply", path=where) from None
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object", path=where)
    return obj


def is_case_text(raw: bytes) -> bool:
    """Whether bytes are a case or scenario file rather than a raw fuzz input.

    Decided by content, not by the first byte: one raw input in 256 starts with `{`.
    Only a JSON object with a `scenario` (case) or `protocol` (bare scenario) key counts.
    """
    if raw.lstrip()[:1] != b"{":
        return False
    try:
        obj = _json_object(raw, "")
    except InputError:
        return False
    return "scenario" in obj or "protocol" in obj


def parse_case(raw: bytes, where: str, stem: str) -> Case:
    """A case (`scenario` + `expect` + `input`) or a bare scenario (which has no expected verdict)."""
    if not raw.strip():
        raise InputError(f"{where}: empty file", path=where)
    obj = _json_object(raw, where)
    if "scenario" not in obj and ("input" in obj or "expect" in obj):  # a case, not a bare scenario
        has = ", ".join(k for k in ("input", "expect") if k in obj)
        raise InputError(f"{where}: a case with no 'scenario' (it has {has})", path=where)
    if "scenario" not in obj and "protocol" not in obj:
        raise InputError(f"{where}: neither a case (no 'scenario' key) nor a scenario (no 'protocol' key)", path=where)
    for key in ("name", "input", "expect", "backend", "note", "signature", "protocol", "preset"):
        if key in obj and not isinstance(obj[key], str):  # `"input": 5` was a TypeError, exit 3
            raise InputError(f"{where}: {key!r} must be a string, not {type(obj[key]).__name__}", path=where)
    agree_first(obj, where)
    try:
        if "scenario" not in obj:  # a bare scenario file
            return Case(stem, codec.load_dict(obj), b"", "", "sim")
        scn = codec.load_dict(obj["scenario"])
        expect = obj.get("expect", "")  # none: replay says UNCHECKED, as for a bare scenario (not unreadable)
        if "expect" in obj and expect not in ("finding", "clean"):
            raise InputError(f"'expect' must be \"finding\" or \"clean\", got {expect!r}")
        data = bytes.fromhex(obj.get("input", ""))
    except InputError as e:
        raise InputError(f"{where}: {e}", path=where) from None
    except ValueError as e:
        raise InputError(f"{where}: bad 'input' hex ({e})", path=where) from None
    except RecursionError:
        raise InputError(f"{where}: scenario nested too deeply", path=where) from None
    if data and codec.decode(data, scn.protocol, scn.preset) != scn:
        raise InputError(f"{where}: 'input' bytes do not decode to 'scenario' (stale case?)", path=where)
    for key in ("protocol", "preset"):  # the case's copies of its scenario's fields must agree with them
        if key in obj and obj[key] != getattr(scn, key):
            raise InputError(f"{where}: {key!r} is {obj[key]!r} but its scenario's is {getattr(scn, key)!r}",
                             path=where)
    if obj.get("backend", "sim") not in BACKEND_NAMES:
        raise InputError(f"{where}: unknown backend {obj['backend']!r}; known: {', '.join(BACKEND_NAMES)}", path=where)
    return Case(obj.get("name", stem), scn, data, expect, obj.get("backend", "sim"),
                obj.get("note", ""), obj.get("signature", ""))


def load_case(path: Path) -> Case:
    return parse_case(read_bounded(path, MAX_CASE_BYTES, "case"), str(path), path.stem)


#: expected verdicts of a corpus folder's raw inputs live next to it (`corpus/<harness>.verdicts`),
#: not in it: libFuzzer would take a file inside for one more input
VERDICTS_SUFFIX = ".verdicts"


def manifest_path(folder: Path) -> Path:
    return folder.parent / f"{folder.name}{VERDICTS_SUFFIX}"


def read_manifest(folder: Path) -> tuple[str, dict[str, str]] | None:
    """(preset the verdicts hold for, {sha1 of input: verdict}), or None without a manifest; a damaged line
    gives no verdict (`parse_manifest` says what is wrong with it)."""
    parsed = parse_manifest(folder)
    return None if parsed is None else (parsed[0], parsed[1])


def parse_manifest(folder: Path) -> tuple[str, dict[str, str], list[str]] | None:
    """(preset, {sha1: verdict}, what is damaged, one line each), or None without a manifest. `write_manifest`
    ends every line with a newline, names each input by its sha1 and says finding or clean: anything else is
    a hand edit or a cut-off file, whose lines must not turn into verdicts (a `clen` was replayed as a change)."""
    path = manifest_path(folder)
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return "", {}, [f"{path}: not text (run `make seeds`)"]
    except OSError:
        return None
    preset, verdicts, damage = "", {}, []
    if text and not text.endswith("\n"):
        damage.append(f"{path}: truncated: its last line has no newline (run `make seeds`)")
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or line.startswith("#"):
            continue
        if len(words) == 2 and words[0] == "preset":
            preset = words[1]
        elif len(words) != 2 or not LIBFUZZER_SHA1.fullmatch(words[0]):
            damage.append(f"{path}:{n}: not 'SHA1 VERDICT' or 'preset NAME': {line[:60]!r}")
        elif words[1] not in ("finding", "clean"):
            damage.append(f"{path}:{n}: verdict {words[1]!r} is not finding or clean")
        else:
            verdicts[words[0]] = words[1]
    if not preset:
        damage.append(f"{path}: no 'preset NAME' line (truncated? run `make seeds`)")
    return preset, verdicts, damage


def write_manifest(folder: Path, preset: str, verdicts: dict[str, str],
                   by: str = "`make seeds` (python -m epfuzz.continuous.seeds), checked by `make replay`") -> Path:
    path = manifest_path(folder)
    head = (f"# expected sim verdicts of the raw inputs in {folder.name}/ (by sha1 of the content); "
            f"written by {by}\n")
    body = "".join(f"{k} {v}\n" for k, v in sorted(verdicts.items()))
    text = f"{head}preset {preset}\n{body}".encode()
    if not path.exists() or path.read_bytes() != text:
        write_atomic(path, text)
    return path


def case_paths(paths: list[Path]) -> list[Path]:
    """Expand folders into their files (sorted, hidden and temp files skipped)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(q for q in _walk(p) if q.is_file() and not q.name.startswith("."))
        else:
            out.append(p)
    return out


def file_stem(protocol: str) -> str:
    """A protocol name fit for a file name (plug-ins are module:Attr)."""
    return "".join(ch if ch.isalnum() or ch in "._-" else "." for ch in protocol)


def _walk(folder: Path) -> list[Path]:
    """Every path under `folder`; a folder that cannot be listed is a one-line `InputError` (rglob
    skipped it without a word, and `replay` said "no files found")."""
    def refuse(e: OSError) -> None:
        raise InputError(f"{e.filename}: cannot read the folder: {e.strerror}", path=e.filename)

    found = []
    for top, dirs, files in os.walk(folder, onerror=refuse):
        dirs.sort()
        found += [Path(top, n) for n in (*dirs, *files)]
    return found
