"""Corpus upkeep: merge, prune (by coverage, via libFuzzer -merge=1), dedup (triage: `epfuzz.triage.run`).

Merge only adds inputs (atomically written) and prune only removes the inputs it
dropped, after the kept set is final: an interruption leaves every kept input. Both
manage only files named by the SHA-1 of their content (libFuzzer's corpus names) and
leave anything else in the folder alone; both lock the folder (epfuzz.infra.folder_lock) and
end their libFuzzer child on a signal or when they die (epfuzz.infra.proc).

`harness` is a harness name, or a plug-in protocol's `module:Attr` (`epfuzz corpus ... --protocol`): named by
the caller, so it is imported (as `--protocol` imports it), and libFuzzer runs it through the package's entry
script (`epfuzz.continuous.targets.entry_command`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from epfuzz.cases.corpus import LIBFUZZER_SHA1, sha1, write_atomic
from epfuzz.cases.replay import decode_raw, read_raw
from epfuzz.continuous.harness import PLUGIN_FOLDER_ENV
from epfuzz.continuous.targets import entry_command, harness_command, harness_name, home_preset
from epfuzz.infra import proc
from epfuzz.infra.errors import HarnessError, InputError
from epfuzz.infra.folder_lock import locked
from epfuzz.protocols import REGISTRY, get_protocol, load_plugin
from epfuzz.triage.findings import signature


def _check(harness: str) -> None:
    """Refuse an unknown harness, or load the plug-in `harness` names, before anything is written."""
    if ":" in harness:
        load_plugin(harness)
    else:
        harness_name(harness)


def _plugin_folder(harness: str) -> dict[str, str]:
    """The environment that tells the libFuzzer child of plug-in `harness` where its module is: it runs in a
    scratch folder, where the module (found here in the current folder) is not, so it gets the folder this
    process imported the module from, on its sys.path while it imports the module, as here (not PYTHONPATH,
    which held it for the child's whole life); {} for a harness name or a module with no file."""
    if ":" not in harness:
        return {}
    top = harness.partition(":")[0].split(".")[0]
    file = getattr(sys.modules.get(top), "__file__", None)
    if not file:
        return {}
    path = Path(file).resolve()
    return {PLUGIN_FOLDER_ENV: str(path.parent.parent if path.name == "__init__.py" else path.parent)}


def _merge(harness: str, dest: Path, sources: list[Path], scratch: Path) -> None:
    """libFuzzer -merge=1, run inside `scratch`: its crash-* artifacts and the harness's finding cases
    land there, not in the user's working directory; --keep-going so a finding does not abort it.
    Every path absolute (the child's working directory is `scratch`: a relative DEST failed, 29.3);
    the child dies with this process and is ended when a signal stops it."""
    scratch = scratch.resolve()
    env = {**os.environ, "EPFUZZ_FINDINGS_DIR": str(scratch), "EPFUZZ_KEEP_GOING": "1", **_plugin_folder(harness)}
    cmd = [*(entry_command(harness) if ":" in harness else harness_command(harness)), "-merge=1",
           f"-artifact_prefix={scratch}/", "--keep-going", f"--findings-dir={scratch}", str(dest.resolve()),
           *(str(s.resolve()) for s in sources)]
    log = scratch / "merge.log"
    with log.open("w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=scratch, env=env,
                             start_new_session=True, preexec_fn=proc.die_with_parent)
        try:
            got = proc.wait(p, timeout=3600)
            rc = -1 if got is None else got
        finally:
            proc.end(p)
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:]
        raise HarnessError(f"libFuzzer -merge=1 failed for {harness}: {tail}")


def _link(src: Path, dst: Path) -> None:
    """`dst` as a second name of `src` (no bytes copied), or a copy where links are refused."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def managed(folder: Path) -> tuple[list[Path], list[str]]:
    """(the inputs merge and prune manage: files at the top of `folder` named by the SHA-1 of their
    content, as libFuzzer names corpus entries; everything else there, by name). Prune deleted a
    README.md and a .gitkeep, flattened subfolders and renamed a notes file (29.2): what it does not
    manage it never touches."""
    inputs, other = [], []
    for p in sorted(folder.iterdir()):
        if p.is_file() and not p.is_symlink() and LIBFUZZER_SHA1.fullmatch(p.name) and sha1(p.read_bytes()) == p.name:
            inputs.append(p)
        else:
            other.append(p.name + ("/" if p.is_dir() else ""))
    return inputs, other


def untouched_note(other: list[str]) -> str:
    """The one line that names what merge or prune left alone ('' when nothing)."""
    if not other:
        return ""
    shown = ", ".join(other[:8]) + (f" and {len(other) - 8} more" if len(other) > 8 else "")
    return f"left {len(other)} file(s) alone that are not inputs named by their SHA-1: {shown}"


def finding_inputs(harness: str, files: list[Path], preset: str | None = None) -> dict[str, list[Path]]:
    """The inputs among `files` that trigger a finding on sim, by raw signature: coverage alone
    would drop them (they add no edge the clean inputs lack), yet they are a corpus's best part.
    Decoded under the preset the harness runs them under (EPFUZZ_PRESET, else the protocol's home
    preset), not `spec`: for a protocol whose bug lives elsewhere spec found none of them (pipfix)."""
    from epfuzz.backends import get_backend

    protocol = harness if ":" in harness else harness.removesuffix(".py").removesuffix("_fuzzer")
    if not REGISTRY.known(protocol):
        return {}
    preset = preset or os.environ.get("EPFUZZ_PRESET") or home_preset(protocol)
    sim = get_backend("sim")
    proto = get_protocol(protocol)
    out: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        try:
            scn, _ = decode_raw(read_raw(f), f, protocol, preset)
        except InputError:
            continue
        o = sim.run(scn, proto)
        if o.violation is not None:
            out[signature(scn, o, proto)].append(f)
    return dict(out)


def merge(harness: str, dest: Path, sources: list[Path]) -> int:
    """Add to `dest` the inputs of `sources` that add coverage, and one input per finding signature
    that `dest` lacks; returns how many were added. `dest` is locked meanwhile; its own files are
    never changed, only new SHA-1-named inputs written (atomically)."""
    for s in sources:
        if not s.is_dir():
            raise InputError(f"{s}: not a folder", path=s)
    _check(harness)  # an unknown harness fails before anything is written
    dest = dest.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    with proc.stop_on_signals(), _says_untouched("merge", dest, "nothing added"), locked(dest) as tmp:
        base = tmp / "merged"  # dest's inputs under second names: libFuzzer's baseline, no copy
        base.mkdir()
        have = [p for p in dest.iterdir() if p.is_file() and not p.is_symlink()]
        for p in have:
            _link(p, base / p.name)
        scratch = tmp / "scratch"
        scratch.mkdir()
        _merge(harness, base, sources, scratch)
        proc.check_stopped()
        before = {p.name for p in have}
        found = finding_inputs(harness, [p for p in base.iterdir() if p.is_file()])
        for sig, files in finding_inputs(harness, [f for s in sources for f in s.iterdir() if f.is_file()]).items():
            if sig not in found:
                data = files[0].read_bytes()
                write_atomic(base / sha1(data), data)
        added = [p for p in base.iterdir() if p.name not in before]
        proc.check_stopped()
        for p in added:
            write_atomic(dest / p.name, p.read_bytes())
    return len(added)


@contextlib.contextmanager
def _says_untouched(action: str, folder: Path, what: str) -> Iterator[None]:
    """A signal stops merge and prune only before they change the corpus (their last `check_stopped`): say so, so
    that an interrupted run (exit 130) does not leave the user wondering what state the corpus is in."""
    try:
        yield
    except proc.Stopped as e:
        sys.stderr.write(f"epfuzz: corpus {action} stopped by signal {e.signum} before changing {folder}: "
                         f"it is as it was ({what})\n")
        raise


def prune(harness: str, corpus: Path) -> tuple[int, int]:
    """Keep the inputs that add coverage and every input that triggers a finding; (before, after)
    counts of the managed inputs (`managed`). Only dropped inputs are removed, one by one, after
    the kept set is final: an interruption leaves a corpus with every kept input and some of the
    dropped ones, never fewer."""
    return prune_noting(harness, corpus)[:2]


def prune_noting(harness: str, corpus: Path) -> tuple[int, int, list[str]]:
    """`prune`, and the names of the files it left alone."""
    if not corpus.is_dir():
        raise InputError(f"{corpus}: not a folder", path=corpus)
    _check(harness)
    corpus = corpus.resolve()
    with proc.stop_on_signals(), _says_untouched("prune", corpus, "nothing removed"), locked(corpus) as tmp:
        inputs, other = managed(corpus)
        staged = tmp / "inputs"
        staged.mkdir()
        for p in inputs:
            _link(p, staged / p.name)
        fresh = tmp / "pruned"
        fresh.mkdir()
        scratch = tmp / "scratch"
        scratch.mkdir()
        proc.check_stopped()
        _merge(harness, fresh, [staged], scratch)
        keep = {p.name for p in fresh.iterdir()}
        for group in finding_inputs(harness, inputs).values():
            keep.update(f.name for f in group)
        proc.check_stopped()  # the last point a signal leaves the corpus as it was
        for p in inputs:
            if p.name not in keep:
                p.unlink(missing_ok=True)
    return len(inputs), sum(1 for p in inputs if p.name in keep), other

