"""The harness table comes from the protocol registry; the harness files are only its OSS-Fuzz entry points.

A pip install has no harnesses/ or corpus/ folder beside the package: what `epfuzz fuzz NAME` runs
and seeds from must be found from the package itself (tests/packaging/test_wheel.py runs it so).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
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
    """It writes every entry point from the registry and compiles those `ossfuzz targets` chooses (cf trial 1: it
    compiled every file it wrote, the buggy zoo halves too); EPFUZZ_ONLY, the old local-build-only filter, is gone."""
    build = (ROOT / ".clusterfuzzlite" / "build.sh").read_text()
    assert 'python3 -m epfuzz.continuous.ossfuzz harnesses "$WORK/harnesses"' in build
    assert "targets=$(python3 -m epfuzz.continuous.ossfuzz targets)" in build
    assert 'for name in $targets; do' in build and 'compile_python_fuzzer "$WORK/harnesses/$name.py"' in build
    assert "for fuzzer in" not in build and "EPFUZZ_ONLY" not in build


def test_a_build_chooses_the_targets_expected_clean_unless_told_otherwise(monkeypatch):
    """ClusterFuzzLite's code-change mode stops at the first crash and batch jobs re-report known bugs: by default
    only targets whose protocol promises clean on its home preset and whose seeds are all clean are built
    (shared_counter_fuzzer exited 77 on its own seeds). EPFUZZ_TARGETS=all or a list of names chooses otherwise."""
    from epfuzz.cases.corpus import read_manifest

    monkeypatch.delenv(targets.TARGETS_ENV, raising=False)
    chosen = targets.selected_targets()
    fixed = [n for n in targets.harness_names() if n.endswith("_fixed_fuzzer")]
    assert set(fixed) < set(chosen) and "write_imm_signal_fuzzer" in chosen
    assert {"shared_counter_fuzzer", "deepep_v2_dispatch_fuzzer", "dispatch_any_fuzzer",
            "tma_flag_fuzzer"}.isdisjoint(chosen)  # tma_flag: clean on PCIe, a finding on its home preset nvlink
    for name in chosen:
        folder = targets.seed_folder(name)
        assert folder is not None
        manifest = read_manifest(folder)
        assert manifest is not None and set(manifest[1].values()) == {"clean"}, name
    assert targets.selected_targets("clean") == chosen
    monkeypatch.setenv(targets.TARGETS_ENV, "all")
    assert targets.selected_targets() == targets.harness_names()
    monkeypatch.setenv(targets.TARGETS_ENV, "shared_counter, inband_tag_fixed_fuzzer")
    assert targets.selected_targets() == ["inband_tag_fixed_fuzzer", "shared_counter_fuzzer"]
    with pytest.raises(InputError, match="unknown harness 'nope_fuzzer'"):
        targets.selected_targets("nope")


def _ossfuzz(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epfuzz.continuous.ossfuzz", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env={**os.environ, **(env or {})})


def test_the_targets_command_prints_the_choice_build_sh_compiles(tmp_path):
    p = _ossfuzz("targets", cwd=tmp_path, env={targets.TARGETS_ENV: ""})
    assert p.returncode == 0 and p.stdout.split() == targets.selected_targets(""), p.stderr
    p = _ossfuzz("targets", cwd=tmp_path, env={targets.TARGETS_ENV: "nope"})
    assert p.returncode == 2 and p.stderr.startswith("epfuzz ossfuzz: unknown harness 'nope_fuzzer'")
    assert len(p.stderr.splitlines()) == 1


def test_a_reader_that_went_away_gets_no_traceback(tmp_path):
    """Pip trial item 10: `... ossfuzz targets | head` printed a BrokenPipeError traceback. The reader here is gone
    before the command writes (its end of the pipe closed first): exit 141 like `epfuzz list | head`, stderr empty."""
    read, write = os.pipe()
    os.close(read)
    try:
        p = subprocess.run([sys.executable, "-m", "epfuzz.continuous.ossfuzz", "targets"], stdout=write,
                           stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=300)
    finally:
        os.close(write)
    assert p.returncode == 141 and p.stderr == "", p.stderr


@pytest.mark.parametrize("command", ["local-build", "package", "harnesses"])
def test_help_prints_help_and_builds_nothing(tmp_path, command):
    """`local-build --help` took --help for the output folder: it made `--help` and `.--help-work` and started
    a multi-minute pip build (cf trial 9)."""
    p = _ossfuzz(command, "--help", cwd=tmp_path)
    assert p.returncode == 0 and "local-build OUT" in p.stdout, p.stderr
    p = _ossfuzz(command, "--out", cwd=tmp_path)
    assert p.returncode == 2 and "unknown option '--out'" in p.stderr
    p = _ossfuzz("local-build", str(tmp_path / "o"), "nope", cwd=tmp_path)
    assert p.returncode == 2 and "unknown harness 'nope_fuzzer'" in p.stderr
    assert list(tmp_path.iterdir()) == []


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


def test_a_harness_file_s_usage_never_writes_into_the_checked_in_seeds():
    """libFuzzer adds new inputs to its first corpus folder: the usage line of every harness file named
    corpus/<name> first, and 60 runs left 8 untracked inputs there that failed `make replay` (cf trial 3)."""
    for path in sorted((ROOT / "harnesses").glob("*_fuzzer.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        command = doc.replace("\\\n", " ")
        line = next(ln for ln in command.splitlines() if ln.strip().startswith("python harnesses/"))
        words = shlex.split(line)
        folders = [w for w in words[2:] if not w.startswith("-")]
        assert folders[0].startswith("runs/") and f"corpus/{path.stem}" in folders[1:], (path.name, line)
        assert "-artifact_prefix=runs/" in line, path.name


def test_a_harness_file_says_where_its_seeds_are_outside_a_checkout_too(tmp_path):
    """The harness files named only the checkout's corpus/<name> (pip trial item 6): an installed epfuzz carries
    the seeds as epfuzz/_corpus/<name> and an OSS-Fuzz build as <name>_seed_corpus.zip. Each place is read off
    what uses it: `seed_folder` here (a checkout) and in an install, and the archive `package` writes."""
    from epfuzz.continuous.ossfuzz import package

    shipped = targets.SHIPPED_CORPUS.relative_to(targets.PACKAGE.parent).as_posix()
    written = {p.name for p in package(tmp_path, only=["deepep_v2_dispatch_fuzzer"])}
    assert "deepep_v2_dispatch_fuzzer_seed_corpus.zip" in written, written
    for path in sorted((ROOT / "harnesses").glob("*_fuzzer.py")):
        doc = " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())
        assert targets.seed_folder(path.stem) == ROOT / "corpus" / path.stem
        assert f"seeds for it are corpus/{path.stem}:" in doc, path.name
        assert f"carries the same seeds as {shipped}/{path.stem}," in doc, path.name
        assert f"zips them beside the fuzzer as {path.stem}_seed_corpus.zip." in doc, path.name
