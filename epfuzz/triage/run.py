"""`epfuzz triage RUN`: group (or finish grouping) a run folder's findings, and update the run.

The campaign's summary groups what it can; a signal, or the step bound, may leave findings
ungrouped, and ClusterFuzz or a libFuzzer run leave raw `crash-*` artifacts. Triage groups them
all (the cache makes findings grouped before free), rewrites the run's `bugs/`, `bugs.csv` and
`ungrouped.txt` (what `epfuzz report` shows), and optionally keeps one minimized case per new root
cause in a regression folder. Nothing is written when nothing changed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from epfuzz.cases.corpus import (
    MAX_CASE_BYTES,
    case_paths,
    is_case_text,
    load_case,
    read_bounded,
    write_atomic,
)
from epfuzz.cases.replay import RUN_MARK, decode_raw, is_run_record, raw_preset, read_raw
from epfuzz.encoding import codec
from epfuzz.infra import log as elog
from epfuzz.infra.errors import InputError
from epfuzz.protocols import get_protocol
from epfuzz.triage.findings import Grouping, case_protocol, group_findings, write_bug_index, write_finding
from epfuzz.triage.group import MAX_STEPS, Progress


@dataclass
class Triage:
    run_dir: Path
    grouping: Grouping
    changed: bool                              # bugs.csv, ungrouped.txt or a case under bugs/ was written
    kept: list[Path] = field(default_factory=list)   # new representatives written to the keep folder
    #: JSON files in the folder that are no case (corrupt, cut short), with why: not grouped, and said
    unreadable: list[tuple[Path, str]] = field(default_factory=list)

    def warning(self) -> str:
        """One line naming what was skipped (a corrupt finding-*.json was dropped without a word), or ""."""
        if not self.unreadable:
            return ""
        path, why = self.unreadable[0]
        return (f"warning: skipped {len(self.unreadable)} file(s) in {self.run_dir} that are no readable case "
                f"(the first: {path.name}: {why.removeprefix(f'{path}: ')})")

    def render(self) -> list[str]:
        """The bug table with each bug's case and replay line, what was kept, and whether anything changed."""
        from epfuzz.triage.findings import bug_table

        out = bug_table(self.grouping, run_dir=self.run_dir) or [f"no findings to group in {self.run_dir}"]
        out += [f"kept: {p}" for p in self.kept]
        out.append("nothing new: bugs.csv and bugs/ were up to date" if not self.changed
                   else f"updated {self.run_dir / 'bugs.csv'} and {self.run_dir / 'bugs'}")
        return out


def _is_case(path: Path) -> bool:
    try:
        return is_case_text(read_bounded(path, MAX_CASE_BYTES, "case"))
    except InputError:
        return True   # unreadable or too big: the grouping says why, as it did


def _not_a_case(path: Path) -> str:
    """Why a JSON file that is no case is none (its parse error), for the warning."""
    try:
        load_case(path)
    except InputError as e:
        return str(e)
    return "not a case"


def _findings(run_dir: Path) -> tuple[list[Path], list[Path], list[tuple[Path, str]]]:
    """(the run's finding cases, its raw `crash-*` artifacts, the JSON files skipped as no case, with why).
    Nothing is written here: the artifacts are wrapped (`_wrap`) only once triage knows it will group."""
    cases: list[Path] = []
    crashes: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for path in case_paths([run_dir]):
        if path.suffix == ".json" and path.parent.name != "bugs":
            if _is_case(path):   # not the run's own records (stats.json, jobs/job-N.json), which counted as
                cases.append(path)   # findings in the grouping's "N of M" while the table said M - 1 (D12)
            # a corrupt finding-*.json: skipped, but said (user trial); a record of the run given, or of a run
            # folder below it (a tree of runs: its runs' stats.json were "no readable case", trial 0205 item 5), not
            elif not is_run_record(path, run_dir) and not is_run_record(path):
                skipped.append((path, _not_a_case(path)))
        elif path.name.startswith("crash-"):
            crashes.append(path)
    return sorted(set(cases)), crashes, skipped


def _wrap(run_dir: Path, crashes: list[Path], protocol: str, preset: str | None, backend: str) -> list[Path]:
    """Raw `crash-*` artifacts of `protocol` as finding cases in the run folder, so `bugs.csv` can name
    them like the others, decoded under `preset` or the protocol's home preset, as its harness decoded them.
    All are run before any is written: a plug-in that raises on the third leaves no wrapped first two behind
    (nor does a refusal before this: `triage` refuses first)."""
    from epfuzz.backends import get_backend

    found = []
    for path in crashes:
        try:
            scn, _ = decode_raw(read_raw(path), path, protocol, raw_preset(protocol, preset))
        except InputError as e:
            elog.error_line(str(e), e.path)
            continue
        proto = get_protocol(scn.protocol)
        out = get_backend(backend).run(scn, proto)
        if out.violation is not None:
            found.append((scn, out, proto))
        else:  # said: a crash clean under the preset given (or the home one) left the table without a word
            elog.error_line(f"{path}: clean under preset {scn.preset} on {backend}, not grouped (the preset its "
                            "run fuzzed under? --preset)", path)
    return [write_finding(run_dir, scn, codec.encode(scn), out, proto) for scn, out, proto in found]


def _refuse_unloadable(run_dir: Path, cases: list[Path]) -> None:
    """Load every protocol the findings name before anything is written, or fail in one line (exit 2,
    or 3 for a plug-in that raises at import). The grouping drops a finding whose protocol does not
    load, so triage without `--protocol` on a plug-in's run rewrote its bugs.csv as empty and said
    "no findings" (an author's trial): now it says what `replay` says, and bugs.csv stays as it was."""
    names: dict[str, int] = {}
    for path in cases:
        spec = case_protocol(path)  # read, not loaded: loading a case resolves its protocol, and fails so
        if spec:                    # ("" for a file that is no JSON case: the grouping's to skip, as before)
            names[spec] = names.get(spec, 0) + 1
    for spec, count in names.items():
        try:
            get_protocol(spec)
        except InputError as e:
            raise InputError(f"triage {run_dir}: cannot group {count} finding(s): {e}") from None


def triage(run_dir: Path, protocol: str | None = None, keep: Path | None = None, preset: str | None = None,
           backend: str = "sim", max_steps: int = MAX_STEPS, progress: Progress | None = None,
           stop: Callable[[], bool] | None = None) -> Triage:
    """Group `run_dir`'s findings by root cause into its `bugs/` and `bugs.csv`; with `keep`, copy each
    minimized case of a root cause the keep folder does not have yet there."""
    bugs_dir = run_dir / "bugs"
    before = {p.name for p in bugs_dir.glob("*.json")} if bugs_dir.is_dir() else set()
    cases, crashes, unreadable = _findings(run_dir)
    if not cases and not crashes and not unreadable and not any(run_dir.rglob(RUN_MARK)):
        # nothing to group and no run below: a typo'd or empty folder got an empty bugs.csv, exit 0, which
        # `report` then refused as no run folder (trial 0205 item 5): refused as report refuses it, nothing written
        raise InputError(f"{run_dir}: no findings (finding-*.json cases, crash-* artifacts) and no {RUN_MARK} "
                         "(not an epfuzz fuzz run folder?)", path=run_dir)
    _refuse_unloadable(run_dir, cases)  # before anything is written, the wrapped artifacts too
    if protocol and crashes:
        cases = sorted(set(cases) | set(_wrap(run_dir, crashes, protocol, preset, backend)))
    elif crashes:  # "no findings to group", exit 0, with a ClusterFuzz crash in the folder (review 1205)
        print(f"epfuzz: {len(crashes)} crash-* artifact(s) in {run_dir} not grouped: name their protocol with "
              "--protocol to wrap them as findings", file=sys.stderr)
    grouping = group_findings(cases, bugs_dir, backend,
                              max_steps=max_steps, stop=stop, progress=progress)
    changed = write_bug_index(grouping, run_dir / "bugs.csv")
    changed |= bool({p.name for p in bugs_dir.glob("*.json")} - before) if bugs_dir.is_dir() else False
    kept: list[Path] = []
    if keep is not None:
        known = set()
        for p in case_paths([keep]) if keep.is_dir() else []:
            try:
                known.add(load_case(p).signature)
            except InputError:
                continue
        for bug in grouping.bugs:
            if bug.cause not in known and bug.minimized:
                keep.mkdir(parents=True, exist_ok=True)
                write_atomic(keep / bug.case.name, bug.case.read_bytes())
                known.add(bug.cause)
                kept.append(keep / bug.case.name)
    return Triage(run_dir, grouping, changed or bool(kept), kept, unreadable)
