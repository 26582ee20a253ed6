"""`epfuzz corpus`, `triage` and `report`: the commands that read a harness's corpus or a run folder.

Each refuses a name or a folder that is not there in one line before it reads or writes anything:
a mistyped harness with the close names, a missing folder as missing (user trial items 2-4).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path

from epfuzz.cli.guard import EXIT_CLEAN, EXIT_FINDING
from epfuzz.infra.errors import InputError
from epfuzz.infra.extras import require
from epfuzz.infra.shipped import missing


def known_harness(name: str) -> None:
    """Refuse a harness name no protocol has, naming it as the user typed it and the close ones
    (`deepep_v2_dispatc`: did you mean deepep_v2_dispatch?), before anything runs or is written."""
    from epfuzz.continuous.targets import SUFFIX, harness_names
    from epfuzz.protocols.registry import unknown_name

    names = harness_names()
    full = name.removesuffix(".py")
    if (full if full.endswith(SUFFIX) else full + SUFFIX) in names:
        return
    # suggest in the form typed: a protocol name for a protocol name, a harness name for a harness name
    known = names if full.endswith(SUFFIX) else [h.removesuffix(SUFFIX) for h in names]
    raise InputError(unknown_name("harness", name, known))


def usable_run_dir(run_dir: Path, writes: str) -> None:
    """Refuse a run folder this process may not read or write into, naming the folder: the system's refusal named
    noperm/bugs or noperm/progress.csv, a path inside what the user gave (pip trial item 11). In the system's
    words, as the other commands say it: a read-only mount was "permission denied" here and "Read-only file
    system" from fuzz and minimize (trial 0205 item 7)."""
    if not os.access(run_dir, os.R_OK | os.X_OK):
        raise InputError(f"cannot read {run_dir}: {os.strerror(errno.EACCES)}")
    if not os.access(run_dir, os.W_OK):
        why = errno.EROFS if os.statvfs(run_dir).f_flag & os.ST_RDONLY else errno.EACCES
        raise InputError(f"cannot write into {run_dir} ({writes} go there): {os.strerror(why)}")


def cmd_corpus(a: argparse.Namespace) -> int:
    from epfuzz.continuous import maintain

    if a.protocol and ":" not in a.protocol:  # a built-in protocol's harness
        a.harness, a.protocol = a.protocol, None
    if a.harness:
        known_harness(a.harness)
    target = a.protocol or a.harness
    if a.action == "manifest":
        return _manifest(target, Path(a.dest), a.preset)
    if a.action == "merge":
        n = maintain.merge(target, Path(a.dest), [Path(p) for p in a.sources])
        print(f"merged {n} input(s) that add coverage into {a.dest}")
    else:
        before, after, other = maintain.prune_noting(target, Path(a.dest))
        print(f"pruned {a.dest}: {before} -> {after} input(s), coverage kept")
        if other:
            print(maintain.untouched_note(other))
    return EXIT_CLEAN


def _manifest(target: str, folder: Path, preset: str | None) -> int:
    """`epfuzz corpus manifest`: pin each input's sim verdict beside the folder, for `replay --strict`."""
    from epfuzz.continuous.seeds import plugin_manifest
    from epfuzz.ir.presets import get_preset
    from epfuzz.protocols import load_plugin

    if not folder.is_dir():
        raise InputError(f"no such folder: {folder}{missing(folder)}" if not folder.exists()
                         else f"{folder}: not a folder (give the corpus folder of raw inputs)")
    if preset:
        get_preset(preset)  # an unknown name, refused before any input is run
    if ":" in target:
        load_plugin(target)
    path, verdicts = plugin_manifest(target if ":" in target else target.removesuffix("_fuzzer"), folder, preset)
    findings = sum(v == "finding" for v in verdicts.values())
    print(f"wrote {path}: {len(verdicts)} input(s), {findings} finding, {len(verdicts) - findings} clean"
          + ("" if verdicts else " (no input named by its sha1 in the folder)"))
    return EXIT_CLEAN


def cmd_triage(a: argparse.Namespace) -> int:
    from epfuzz.campaign.common import GroupingProgress
    from epfuzz.infra.log import get_logger
    from epfuzz.triage.run import triage

    if not Path(a.run_dir).exists():  # "not a folder" sent the user to check what it was (new-user trial item 9)
        raise InputError(f"no such folder: {a.run_dir}{missing(Path(a.run_dir))}")
    if not Path(a.run_dir).is_dir():
        raise InputError(f"cannot read {a.run_dir}: not a folder")
    usable_run_dir(Path(a.run_dir), "bugs/ and bugs.csv")
    got = triage(Path(a.run_dir), a.protocol, Path(a.keep) if a.keep else None, a.preset, max_steps=a.max_steps,
                 progress=GroupingProgress(get_logger(command="triage")))
    warning = got.warning()
    if warning:
        print(f"epfuzz: {warning}", file=sys.stderr)
    print("\n".join(got.render()))
    return EXIT_FINDING if got.grouping.bugs or got.grouping.left else EXIT_CLEAN


def cmd_report(a: argparse.Namespace) -> int:
    from epfuzz.triage.report import report

    run_dir = Path(a.run_dir)
    if not run_dir.exists():  # "no progress.csv (not a run folder?)" sent the user looking inside nothing
        raise InputError(f"no such folder: {a.run_dir}{missing(run_dir)}")
    if not run_dir.is_dir():
        raise InputError(f"{a.run_dir}: not a folder (an epfuzz fuzz run folder holds progress.csv)", path=a.run_dir)
    usable_run_dir(run_dir, "report.md and report.png")
    if not a.no_png:
        require("matplotlib", "report's plot", "or --no-png for report.md alone")
    text, png = report(run_dir, png=not a.no_png)
    print(text)
    if png:
        print(f"plot: {png}")
    return EXIT_CLEAN
