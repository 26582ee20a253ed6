"""The harness table comes from the protocol registry; the harness files are only its OSS-Fuzz entry points.

A pip install has no harnesses/ or corpus/ folder beside the package: what `epfuzz fuzz NAME` runs
and seeds from must be found from the package itself (tests/packaging/test_wheel.py runs it so).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from epfuzz.continuous import targets
from epfuzz.continuous.ossfuzz import harness_source, harnesses
from epfuzz.infra.errors import InputError
from epfuzz.protocols import BUILTIN

ROOT = Path(__file__).resolve().parents[2]


def test_there_is_one_harness_per_built_in_protocol_and_no_other():
    assert targets.harness_names() == sorted(f"{p}_fuzzer" for p in BUILTIN)
    assert targets.harness_name("deepep_v2_dispatch") == targets.harness_name("deepep_v2_dispatch_fuzzer.py")
    known = ", ".join(targets.harness_names())  # every harness, sorted
    with pytest.raises(InputError, match=re.escape(f"unknown harness 'nope_fuzzer'; known: {known}")):
        targets.harness_name("nope")


def test_the_harness_files_are_the_generated_entry_points(tmp_path):
    """harnesses/ is what `python -m epfuzz.continuous.ossfuzz harnesses harnesses` writes (build.sh writes the
    same into $WORK): a protocol added without its file, or a file edited by hand, fails here."""
    on_disk = {p.name: p.read_text() for p in (ROOT / "harnesses").glob("*.py")}
    generated = {p.name: p.read_text() for p in harnesses(tmp_path)}
    assert set(on_disk) == set(generated), "run: python -m epfuzz.continuous.ossfuzz harnesses harnesses"
    assert on_disk == generated, "run: python -m epfuzz.continuous.ossfuzz harnesses harnesses"
    assert 'main("dispatch_any", sys.argv)' in harness_source("dispatch_any_fuzzer")


def test_build_sh_compiles_the_entry_points_written_from_the_registry():
    build = (ROOT / ".clusterfuzzlite" / "build.sh").read_text()
    assert 'python3 -m epfuzz.continuous.ossfuzz harnesses "$WORK/harnesses"' in build
    assert 'for fuzzer in "$WORK"/harnesses/*_fuzzer.py' in build and "for fuzzer in harnesses/" not in build


def test_a_harness_runs_the_package_entry_script_with_its_protocol():
    cmd = targets.harness_command("inband_tag_fixed")
    assert cmd[1] == str(targets.ENTRY) and targets.ENTRY.is_file()
    assert targets.ENTRY.is_relative_to(targets.PACKAGE) and targets.PACKAGE.name == "epfuzz"  # inside the package
    assert cmd[2] == "--protocol=inband_tag_fixed"


def test_seeds_come_from_the_checkout_here_and_from_the_shipped_copy_in_an_install(tmp_path, monkeypatch):
    assert targets.seed_folder("deepep_v2_dispatch_fuzzer") == ROOT / "corpus" / "deepep_v2_dispatch_fuzzer"
    assert targets.seed_folder("examples.seqflag.SeqFlag_fuzzer") is None  # a plug-in has none shipped
    # an installed package: no checkout above it; the wheel's copy (setup.py) is the corpus
    assert targets.source_root(tmp_path / "site-packages" / "epfuzz") is None
    assert targets.source_root(targets.PACKAGE) == ROOT
    shipped = tmp_path / "_corpus"
    (shipped / "deepep_v2_dispatch_fuzzer").mkdir(parents=True)
    monkeypatch.setattr(targets, "source_root", lambda package: None)
    monkeypatch.setattr(targets, "SHIPPED_CORPUS", shipped)
    assert targets.seed_folder("deepep_v2_dispatch_fuzzer") == shipped / "deepep_v2_dispatch_fuzzer"
    assert targets.seed_folder("dispatch_any_fuzzer") is None
