"""The named fuzz targets ("harnesses"): one per built-in protocol, read off the protocol registry.

A harness is `<protocol>_fuzzer`, the OSS-Fuzz name. What runs it is one entry script inside the
package (`epfuzz/continuous/plugin_fuzzer.py --protocol=NAME`), and its seeds are the corpus shipped with the
package, so `epfuzz fuzz NAME`, `corpus merge/prune NAME` and `epfuzz list` work from any folder of
a pip install: the top-level `harnesses/` files are thin OSS-Fuzz entry points generated from this
table (`python -m epfuzz.continuous.ossfuzz harnesses DIR`), never looked up.

Seeds come from the checkout's `corpus/` when epfuzz runs from one (where `make seeds` writes), else
from the copy the wheel carries (`epfuzz/_corpus/`, setup.py puts it there).
"""

from __future__ import annotations

import sys
from pathlib import Path

from epfuzz.infra.errors import InputError
from epfuzz.infra.shipped import SHIPPED, source_root

#: the epfuzz package folder
PACKAGE = Path(__file__).resolve().parent.parent
#: the one harness script every named target and every plug-in protocol runs under libFuzzer (beside this)
ENTRY = Path(__file__).resolve().parent / "plugin_fuzzer.py"  # its sibling in continuous/
SUFFIX = "_fuzzer"
#: the corpus copied into the wheel (setup.py's build_py)
SHIPPED_CORPUS = PACKAGE / SHIPPED["corpus"]


def harness_names() -> list[str]:
    from epfuzz.protocols import BUILTIN

    return sorted(f"{p}{SUFFIX}" for p in BUILTIN)


def harness_name(name: str) -> str:
    """The harness `name` means (`deepep_v2_dispatch`, `..._fuzzer` or `..._fuzzer.py`), or an
    `InputError` that lists the known ones."""
    name = name.removesuffix(".py")
    if not name.endswith(SUFFIX):
        name += SUFFIX
    if name not in harness_names():
        raise InputError(f"unknown harness {name!r}; known: {', '.join(harness_names())}")
    return name


def harness_protocol(name: str) -> str:
    return harness_name(name).removesuffix(SUFFIX)


def home_preset(protocol: str) -> str:
    """Where the protocol's bug lives (`Protocol.home_preset`): what `epfuzz fuzz` and a harness run under when
    neither --preset nor EPFUZZ_PRESET says (ClusterFuzzLite passes neither); spec for a name not known (the
    campaign or the harness says why). The same answer a raw input's decoding takes (`raw_preset`)."""
    from epfuzz.cases.replay import raw_preset

    return raw_preset(protocol, None)


def entry_command(protocol: str) -> list[str]:
    """The argv prefix that runs `protocol` (a built-in name or a `module:Attr` plug-in) under
    libFuzzer through the one entry script (corpus folders and flags follow)."""
    return [sys.executable, str(ENTRY), f"--protocol={protocol}"]


def harness_command(name: str) -> list[str]:
    """The argv prefix that runs harness `name` under libFuzzer."""
    return entry_command(harness_protocol(name))


def corpus_root() -> Path | None:
    """The folder of seed corpora and pinned cases: the checkout's corpus/, else the shipped copy."""
    root = source_root(PACKAGE)
    if root is not None and (root / "corpus").is_dir():
        return root / "corpus"
    return SHIPPED_CORPUS if SHIPPED_CORPUS.is_dir() else None


def seed_folder(name: str) -> Path | None:
    """The seed corpus of harness (or plug-in harness) `name`, if one ships; it is only ever read."""
    root = corpus_root()
    folder = root / name if root is not None else None
    return folder if folder is not None and folder.is_dir() else None


#: what chooses the targets an OSS-Fuzz / ClusterFuzzLite build compiles (build.sh; the Dockerfile's ENV sets it)
TARGETS_ENV = "EPFUZZ_TARGETS"


def expected_clean(name: str) -> bool:
    """Whether harness `name` is expected to find nothing: its protocol promises "clean" under the preset the
    harness runs (its home preset) and no seed of its checked-in manifest is a finding. The bug zoo's buggy
    halves crash on their own seeds (exit 77 while libFuzzer loads them): continuous fuzzing of those only
    re-reports known bugs, and code-change mode stops at the first one."""
    from epfuzz.cases.corpus import read_manifest
    from epfuzz.protocols import get_protocol

    proto = get_protocol(harness_protocol(name))
    rule = proto.expect
    verdict = rule if isinstance(rule, str) else rule.get(proto.home_preset, rule.get("*")) \
        if isinstance(rule, dict) else None  # a callable decides per scenario: no promise for the whole target
    if verdict != "clean":
        return False
    folder = seed_folder(name)
    manifest = read_manifest(folder) if folder is not None else None
    return manifest is None or "finding" not in manifest[1].values()


def selected_targets(spec: str | None = None) -> list[str]:
    """The harnesses a build compiles: `spec` (default: $EPFUZZ_TARGETS) is "clean" or empty (those expected to
    find nothing, `expected_clean`), "all" (the buggy zoo halves too: demos, benchmarks) or harness names
    separated by spaces or commas (an unknown one is an `InputError` naming the known ones)."""
    import os

    spec = (os.environ.get(TARGETS_ENV, "") if spec is None else spec).strip()
    if spec in ("", "clean"):
        return [n for n in harness_names() if expected_clean(n)]
    if spec == "all":
        return harness_names()
    names = [harness_name(w) for w in spec.replace(",", " ").split()]
    return sorted(set(names))
