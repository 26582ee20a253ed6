"""What a user points the CLI at, and what `epfuzz replay` expects of each file.

A path is a case file, a bare scenario, a raw fuzz input or `-` (stdin). The file is
read once, capped, and classified by its content: a raw input may well start with `{`.
Replay checks every input against an expected verdict (the case's `expect`, the
corpus folder's manifest, or the protocol's promise to be clean); an input without one
is reported as unchecked, never as passing.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from epfuzz.cases.corpus import (
    LIBFUZZER_SHA1,
    MAX_CASE_BYTES,
    Case,
    case_paths,
    is_case_text,
    manifest_path,
    parse_case,
    parse_manifest,
    read_bounded,
    read_manifest,
    sha1,
)
from epfuzz.encoding import codec
from epfuzz.encoding.pins import fixed_fields
from epfuzz.infra.errors import EpfuzzError, InputError
from epfuzz.ir.choices import ChoiceReader
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import REGISTRY, get_protocol

#: file names libFuzzer gives corpus entries and artifacts: what a folder holds that is an input
LIBFUZZER_NAME = re.compile(r"([0-9a-f]{40}|(crash|timeout|oom|leak|slow-unit)-[0-9a-f]+)")
#: what a run folder holds besides inputs; never replayed, never an error
NOT_INPUT_SUFFIXES = {".csv", ".log", ".md", ".png", ".svg", ".txt", ".verdicts"}
#: the JSON records `epfuzz fuzz` writes into a run folder beside its cases (epfuzz.campaign.guided and
#: guided_jobs): `stats.json` at the top, `jobs/job-J.json` per worker. They are no cases: replaying one
#: was an "unreadable" error and exit 2 on every fresh run folder (user trial, item 1)
RUN_RECORD = re.compile(r"stats\.json")
JOB_RECORD = re.compile(r"job-[0-9]+\.json")
#: what marks a folder as a run folder: `epfuzz fuzz` writes it first and appends to it to the end
RUN_MARK = "progress.csv"


def is_run_record(path: Path, run_dir: Path | None = None) -> bool:
    """Whether `path` is one of a run folder's own records, not a case. `run_dir`: the run folder the caller
    was given (triage); without it (replay, given any folder) only inside a folder that holds a progress.csv,
    so a user's `stats.json` case elsewhere is still replayed (and its errors said)."""
    if RUN_RECORD.fullmatch(path.name):
        folder = path.parent
    elif JOB_RECORD.fullmatch(path.name) and path.parent.name == "jobs":
        folder = path.parent.parent
    else:
        return False
    return folder == run_dir if run_dir is not None else (folder / RUN_MARK).is_file()


#: the name ClusterFuzz gives a testcase it lets you download: its fuzz target (`<protocol>_fuzzer`) and its id
CLUSTERFUZZ_TESTCASE = re.compile(r"clusterfuzz-testcase(?:-minimized)?-(?P<target>\w+?)_fuzzer-\d+")


def protocol_from_path(path: Path) -> str | None:
    """The protocol a path names: a ClusterFuzz testcase's file name (`clusterfuzz-testcase-minimized-<protocol>
    _fuzzer-<id>`: the operator downloads it alone, outside any corpus folder; operator trial 1205, item 2), or a
    folder above it: a harness's corpus (`<protocol>_fuzzer/`) or a run folder (`<protocol>_fuzzer-<engine>-<time>/`,
    whose corpus/ a user replays; user audit D10)."""
    m = CLUSTERFUZZ_TESTCASE.fullmatch(path.name)
    if m and REGISTRY.known(m["target"]):
        return m["target"]
    for part in reversed(path.resolve().parts[:-1]):
        name = part.partition("_fuzzer-")[0] if "_fuzzer-" in part else part.removesuffix("_fuzzer")
        if REGISTRY.known(name):
            return name
    return None


def _name(path: Path) -> str:
    return "stdin" if str(path) == "-" else path.name


def raw_preset(protocol: str, preset: str | None) -> str:
    """The preset raw bytes of `protocol` decode under: `preset` where the user gave one, else the protocol's home
    preset, the one its harness (ClusterFuzzLite's passes none) and `epfuzz fuzz` decoded them under. It was
    spec: a crash of the tma_flag harness (fuzzed under nvlink) ran clean under `epfuzz run --protocol tma_flag`,
    and triage dropped it (operator trial 1205, item 1)."""
    if preset:
        return preset
    try:
        return get_protocol(protocol).home_preset
    except EpfuzzError:  # the decoder says why in its own words
        return "spec"


def load_any(path: Path, protocol: str | None, preset: str | None, raw: bool = False,
             switch: bool = False) -> Case:
    """A case, a bare scenario, or raw fuzz bytes (protocol from `--protocol` or the folder name)."""
    return load_classified(path, protocol, preset, raw, switch)[0]


def load_classified(path: Path, protocol: str | None, preset: str | None, raw: bool = False,
                    switch: bool = False) -> tuple[Case, bool]:
    """(the case, whether it was a raw input): `raw` forces raw bytes whatever they look like.

    `protocol` (`--protocol`) names the protocol of raw bytes; a case that names another protocol is refused,
    as one naming another plug-in is: re-run under `protocol` it lost its `expect`, and `epfuzz replay FOLDER
    --protocol P` passed a DeepEP regression case as a clean P run (new-user trial item 2). `switch`: move such
    a case to `protocol` instead (a campaign's seeds, which only lend their scenario to its decoder)."""
    data = read_bounded(path, MAX_CASE_BYTES, "input" if raw else "case", over=True)
    if not raw and (path.suffix == ".json" or is_case_text(data)):
        if len(data) > MAX_CASE_BYTES:
            raise InputError(f"{path}: more than {MAX_CASE_BYTES} bytes, over the {MAX_CASE_BYTES}-byte case limit",
                             path=path)
        case = parse_case(data, str(path), path.stem if str(path) != "-" else "stdin")
        if protocol and case.scenario.protocol != protocol:
            if not switch:
                raise InputError(f"{path}: the case names protocol {case.scenario.protocol!r}, not the --protocol "
                                 f"{protocol!r}: --protocol applies only to raw fuzz inputs and to cases of that "
                                 "protocol (leave it out to run the case as its own protocol, or copy the case and "
                                 "change its \"protocol\" field to run it as another)", path=path)
            case = Case(case.name, switch_protocol(case.scenario, protocol, str(path)), b"", "")
        return case, False
    proto = protocol or protocol_from_path(path)
    if proto is None:
        raise InputError(f"{path}: raw fuzz input; say which protocol with --protocol", path=path)
    scn, data = decode_raw(data, path, proto, raw_preset(proto, preset))
    return Case(_name(path), scn, data, ""), True


def read_raw(path: Path) -> bytes:
    """A raw fuzz input's bytes for `decode_raw`: up to MAX_CASE_BYTES + 1 (a pipe or /dev/zero is no longer)."""
    return read_bounded(path, MAX_CASE_BYTES, over=True)


def decode_raw(data: bytes, path: Path, protocol: str, preset: str) -> tuple[Scenario, bytes]:
    """(the scenario, the bytes it is decoded from) of a raw input read by `read_raw`, as its harness decodes
    it: the whole input, whatever its length. Inputs over 4096 bytes (libFuzzer's default -max_len) were
    refused, where the harness runs them: a long crash ClusterFuzz found could not be replayed (ops trial 1205
    item 7). Past MAX_CASE_BYTES the rest is not read: the decoder reads a bounded prefix (missing bytes read as
    zeros), and where it reads no byte past the first MAX_CASE_BYTES the rest cannot change the scenario."""
    if len(data) <= MAX_CASE_BYTES:
        return codec.decode(data, protocol, preset), data
    head = data[:MAX_CASE_BYTES]
    reader = ChoiceReader(head)
    codec.decoder_for(protocol, preset)(reader)
    if reader.pos > len(head):
        raise InputError(f"{path}: more than {MAX_CASE_BYTES} bytes, and protocol {protocol}'s decoder reads past "
                         "them: over the input limit", path=path)
    return codec.decode(head, protocol, preset), head


def switch_protocol(scn: Scenario, protocol: str, where: str) -> Scenario:
    """`scn` under another protocol, with that protocol's (and the preset's) pinned fields applied.

    Keeping the old protocol's pins would run the new protocol on a configuration it
    never allows (issue 18.6); each changed field is said on stderr. A pin the
    scenario cannot take is refused (`InputError`).
    """
    out = scn.replace(protocol=protocol)
    changed = []
    for path, value in fixed_fields(protocol, scn.preset).items():
        head, _, rest = path.partition(".")
        old = getattr(getattr(out, head), rest) if rest else getattr(out, head)
        if old != value:
            changed.append(f"{path}={value!r} (was {old!r})")
            out = out.with_path(path, value)
    try:
        out = codec.load_dict(out.to_dict())
    except InputError as e:
        raise InputError(f"{where}: cannot run under protocol {protocol}: {e}", path=where) from None
    if changed:
        sys.stderr.write(f"epfuzz: {where}: protocol {protocol} pins " + ", ".join(changed) + "\n")
    return out


def replayable(paths: list[Path], protocol: str | None) -> tuple[list[Path], list[Path]]:
    """(files to replay, files skipped): a named file is always tried; a folder gives its case
    files and its inputs (libFuzzer-named, in a harness folder or with --protocol), not its logs,
    reports or a run's working corpus of another harness."""
    keep: list[Path] = []
    skipped: list[Path] = []
    for p in paths:
        if not p.is_dir():
            keep.append(p)
            continue
        for f in case_paths([p]):
            named = LIBFUZZER_NAME.fullmatch(f.name) or CLUSTERFUZZ_TESTCASE.fullmatch(f.name)
            raw_input = (f.suffix not in NOT_INPUT_SUFFIXES and named is not None
                         and (protocol or protocol_from_path(f)) is not None)
            case_file = f.suffix == ".json" and not is_run_record(f)
            (keep if case_file or raw_input else skipped).append(f)
    return keep, skipped


def _saved_as_crash(path: Path) -> bool:
    """libFuzzer's crash artifact (`crash-<sha1>`) or a ClusterFuzz testcase: an input kept for its finding."""
    return path.name.startswith("crash-") or CLUSTERFUZZ_TESTCASE.fullmatch(path.name) is not None


@dataclass(frozen=True)
class Expectation:
    verdict: str        # "finding" | "clean" | "" (none known)
    source: str         # where it comes from, or why there is none


def expected(case: Case, path: Path, raw: bool) -> Expectation:
    """The verdict `case` should have; a raw input's manifest counts only if it holds verdicts for the preset the
    input was decoded under."""
    preset = case.scenario.preset
    if case.expect:
        return Expectation(case.expect, "case")
    if raw:
        m = read_manifest(path.parent)
        if m is not None and m[0] == preset and sha1(case.input) in m[1]:
            return Expectation(m[1][sha1(case.input)], str(manifest_path(path.parent)))
    rule = get_protocol(case.scenario.protocol).expect
    promise = get_protocol(case.scenario.protocol).expected(case.scenario)
    if promise == "clean":
        return Expectation("clean", f"protocol {case.scenario.protocol} is expected clean")
    # a preset's "finding" says the protocol's bug lives there, not that every input shows it: a corpus input
    # (a run's, a harness folder's without its manifest) is mostly clean. It holds for an input saved because it
    # crashed; a callable decides each scenario. Raw inputs decode under the home preset now, so a tma_flag run's
    # corpus replayed as all CHANGED (review 1205)
    if promise == "finding" and not isinstance(rule, str) and (not raw or callable(rule) or _saved_as_crash(path)):
        return Expectation("finding", f"protocol {case.scenario.protocol} expects a finding under "
                                      f"preset {case.scenario.preset}")
    if not raw:
        return Expectation("", "a bare scenario or a case without 'expect' has no expected verdict "
                               "(give the case an 'expect')")
    m = read_manifest(path.parent)
    if m is None:
        return Expectation("", f"no manifest {manifest_path(path.parent)}; `epfuzz corpus manifest` writes one")
    if m[0] != preset:
        return Expectation("", f"{manifest_path(path.parent)} holds verdicts for preset {m[0]}, not {preset}")
    return Expectation("", f"not in {manifest_path(path.parent)} (run `make seeds`)")


@dataclass(frozen=True)
class ManifestProblem:
    line: str           # what is wrong, one line naming the file
    damage: bool        # the manifest itself is malformed (an error always), else a mismatch with its folder
    path: str = ""      # the file: the manifest, or the seed in its folder


def manifest_problems(given: list[Path], strict: bool) -> list[ManifestProblem]:
    """What is wrong with the seed manifests of the folders replayed (`given`, and the folders inside those):
    a malformed manifest (cut off, a line that is not `SHA1 VERDICT`, a verdict not finding/clean), a seed it
    lists that is missing from its folder (a deleted seed passed --strict), and with `strict`, a file in the
    folder not named by its content's sha1 (skipped as no input, so never checked)."""
    folders: list[Path] = []
    for p in given:
        if p.is_dir():
            folders += [p, *sorted(q for q in p.rglob("*") if q.is_dir())]
        elif str(p) != "-":
            folders.append(p.parent)
    out: list[ManifestProblem] = []
    for folder in dict.fromkeys(f.resolve() for f in folders):
        parsed = parse_manifest(folder)
        if parsed is None:
            continue
        _, verdicts, damage = parsed
        mpath = manifest_path(folder)
        out += [ManifestProblem(d, True, str(mpath)) for d in damage]
        names = {f.name for f in folder.iterdir() if f.is_file() and not f.name.startswith(".")}
        out += [ManifestProblem(f"{mpath}: lists {h} ({v}) but {folder / h} is missing (run `make seeds`)", False,
                                str(mpath)) for h, v in sorted(verdicts.items()) if h not in names]
        if strict:
            for name in sorted(names):
                try:
                    data = (folder / name).read_bytes()
                except OSError as e:  # replaying it says so too, as an unreadable file
                    out.append(ManifestProblem(f"{folder / name}: cannot read: {e.strerror}", False,
                                               str(folder / name)))
                    continue
                if not LIBFUZZER_SHA1.fullmatch(name):
                    out.append(ManifestProblem(f"{folder / name}: a seed not named by its sha1, so never replayed "
                                               f"(libFuzzer's name for it: {sha1(data)}; then run `make seeds`)",
                                               False, str(folder / name)))
                elif sha1(data) != name:
                    out.append(ManifestProblem(f"{folder / name}: its content's sha1 is {sha1(data)}, not its name "
                                               "(edited after `make seeds`?)", False, str(folder / name)))
    return out
