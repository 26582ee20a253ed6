"""Continuous-fuzzing support: OSS-Fuzz packaging and a Docker-free build, corpus merge/prune,
crash triage and the run report."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from epfuzz.backends import get_backend
from epfuzz.cases.corpus import load_case, sha1
from epfuzz.cli.commands import main as cli
from epfuzz.continuous import maintain
from epfuzz.continuous.ossfuzz import bundle_args, package
from epfuzz.continuous.targets import selected_targets
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.triage.minimize import is_one_minimal, reproduces

ROOT = Path(__file__).resolve().parents[2]


def test_package_writes_zip_dict_options_per_built_harness(tmp_path, monkeypatch):
    """Per target the build compiles (by default the clean ones), and nothing for a target it does not build."""
    monkeypatch.delenv("EPFUZZ_TARGETS", raising=False)
    package(tmp_path)
    built = selected_targets()
    assert {p.name.removesuffix("_seed_corpus.zip") for p in tmp_path.glob("*.zip")} == set(built)
    for name in built:
        z = tmp_path / f"{name}_seed_corpus.zip"
        with zipfile.ZipFile(z) as zf:
            names = zf.namelist()
            assert names and all(sha1(zf.read(n)) == n for n in names)
        assert "max_len" in (tmp_path / f"{name}.options").read_text()
        assert re.search(r'^seed_0="(\\x[0-9a-f]{2})+"$', (tmp_path / f"{name}.dict").read_text(), re.M)


def test_build_sh_and_workflows_exist():
    for p in (".clusterfuzzlite/build.sh", ".clusterfuzzlite/Dockerfile", ".clusterfuzzlite/project.yaml",
              "oss-fuzz/build.sh", "oss-fuzz/Dockerfile", "oss-fuzz/project.yaml",
              ".github/workflows/cflite_pr.yml", ".github/workflows/cflite_batch.yml"):
        assert (ROOT / p).exists(), p
    pr = (ROOT / ".github/workflows/cflite_pr.yml").read_text()
    assert "mode: code-change" in pr and "fuzz-seconds: 600" in pr
    batch = (ROOT / ".github/workflows/cflite_batch.yml").read_text()
    assert "mode: batch" in batch and "mode: prune" in batch


def _core_unbuildable() -> str | None:
    """Why the compiled core cannot be built on this machine (None: it can: a C compiler and Python.h)."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers"
    return None


@pytest.mark.slow
def test_local_build_compiles_and_runs_a_fuzzer(tmp_path):
    """The bundle ClusterFuzzLite runs is the compiled emulator wherever build.sh can build it: the build log
    says which one the installed copy runs, and the bundled fuzzer's first line says which one it ran."""
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "epfuzz.continuous.ossfuzz", "local-build", str(out),
                        "deepep_v2_dispatch_fixed_fuzzer", "deepep_v2_dispatch_fuzzer"],
                       capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert (out / "deepep_v2_dispatch_fixed_fuzzer.pkg").exists()
    _bundled_replay_line_runs(out / "deepep_v2_dispatch_fuzzer", tmp_path)
    why = _core_unbuildable()
    emulator = "pure" if why else "compiled"
    assert f"deepep_v2_dispatch_fixed_fuzzer: ran, emulator {emulator}" in p.stdout, (why, p.stdout[-2000:])
    if why is None:
        assert re.search(r"^epfuzz build: \S+/site-packages/epfuzz runs compiled \(mypyc\)$", p.stdout, re.M), \
            p.stdout[-3000:]


def _bundled_replay_line_runs(fuzzer: Path, tmp: Path) -> None:
    """The replay line a bundled fuzzer prints for its crash, pasted into a shell that has epfuzz installed
    (the bundle is no Python: `BUNDLE -m epfuzz run` went to libFuzzer, cf trial 2), replays the finding."""
    import random

    from epfuzz.sim.engine import simulate

    proto, rng = get_protocol("deepep_v2_dispatch"), random.Random(1)
    data = next(d for d in (rng.randbytes(rng.randrange(8, 96)) for _ in range(5000))
                if simulate(codec.decode(d, "deepep_v2_dispatch", "spec"), proto).violation is not None)
    work = tmp / "crash-here"
    work.mkdir()
    seed = tmp / "input"
    seed.write_bytes(data)
    p = subprocess.run([str(fuzzer), str(seed)], capture_output=True, text=True, timeout=300, cwd=work)
    assert p.returncode != 0, p.stderr[-2000:]
    line = next((x.split("replay: ", 1)[1] for x in p.stderr.splitlines() if "replay: " in x), None)
    assert line is not None and line.startswith("epfuzz run "), p.stderr[-2000:]
    bindir = Path(sys.executable).parent  # the `epfuzz` of this environment stands for the user's
    env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
    q = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=300, cwd=work, env=env)
    assert q.returncode == 1 and "finding" in (q.stdout + q.stderr).lower(), (line, q.stdout[-1000:], q.stderr[-1000:])


def test_bundle_names_what_the_compiled_modules_import():
    """PyInstaller cannot read imports out of a mypyc extension: the bundle's arguments name them (stdlib ones
    such as bisect, and the submodule of `from isal import isal_zlib` where isal is installed), never a name
    that is no module (`from typing import Any`) nor an epfuzz module (collected whole)."""
    args = bundle_args()
    assert args[:4] == ["--collect-submodules", "epfuzz", "--collect-binaries", "epfuzz"]
    hidden = {args[i + 1] for i, a in enumerate(args) if a == "--hidden-import"}
    assert {"bisect", "zlib", "numpy"} <= hidden
    assert "typing.Any" not in hidden and "typing" in hidden
    assert not any(m.startswith(("epfuzz", "__future__")) for m in hidden)
    assert ("isal.isal_zlib" in hidden) == (importlib.util.find_spec("isal") is not None)


def _coverage(harness: str, corpus: Path) -> int:
    p = subprocess.run([sys.executable, str(ROOT / "harnesses" / f"{harness}.py"), str(corpus), "-runs=0"],
                       capture_output=True, text=True, timeout=300)
    m = re.search(r"INITED cov: (\d+) ft: (\d+)", p.stderr)
    assert m, p.stderr[-1000:]
    return int(m.group(2))


@pytest.mark.slow
def test_prune_keeps_coverage_and_merge_adds_only_new(tmp_path):
    h = "deepep_v2_dispatch_fixed_fuzzer"
    corpus = tmp_path / "c"
    shutil.copytree(ROOT / "corpus" / h, corpus)
    for f in list(corpus.iterdir())[:5]:  # copies under other names: not prune's to manage (issue 29.2)
        (corpus / (f.name + "dup")).write_bytes(f.read_bytes())
    ft_before = _coverage(h, corpus)
    before, after = maintain.prune(h, corpus)
    assert after < before
    assert len(list(corpus.glob("*dup"))) == 5
    assert _coverage(h, corpus) == ft_before
    assert maintain.merge(h, corpus, [ROOT / "corpus" / h]) == 0  # nothing new to add


@pytest.mark.slow
def test_prune_and_merge_keep_finding_inputs_and_write_nothing_here(tmp_path, monkeypatch):
    """Coverage alone drops the inputs that trigger a finding, and libFuzzer's -merge leaves crash-*
    artifacts in the working directory: neither may happen (issue 16, point 5b)."""
    h = "shared_counter_fuzzer"
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    corpus = tmp_path / "c"
    shutil.copytree(ROOT / "corpus" / h, corpus)
    findings = maintain.finding_inputs(h, sorted(corpus.iterdir()))
    assert findings
    maintain.prune(h, corpus)
    kept = {p.name for p in corpus.iterdir()}
    assert {f.name for group in findings.values() for f in group} <= kept
    dest = tmp_path / "d"
    dest.mkdir()
    maintain.merge(h, dest, [ROOT / "corpus" / h])
    assert set(maintain.finding_inputs(h, sorted(dest.iterdir()))) == set(findings)
    assert list(here.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "cwd", "d"]


@pytest.mark.slow
def test_finding_inputs_are_judged_under_the_preset_the_harness_runs(tmp_path, monkeypatch):
    """prune/merge keep the inputs that find a bug; they decoded them under spec while the harness runs a
    protocol under its home preset (ro_only_strict_mr: mlx5-ro-only), so such an input was not kept as one."""
    import random

    from epfuzz.sim.engine import simulate

    monkeypatch.delenv("EPFUZZ_PRESET", raising=False)
    name, proto, rng = "ro_only_strict_mr", get_protocol("ro_only_strict_mr"), random.Random(1)
    data = next(d for d in (rng.randbytes(rng.randrange(8, 96)) for _ in range(5000))
                if simulate(codec.decode(d, name, "mlx5-ro-only"), proto).violation is not None
                and simulate(codec.decode(d, name, "spec"), proto).violation is None)
    f = tmp_path / sha1(data)
    f.write_bytes(data)
    assert [f] in maintain.finding_inputs(f"{name}_fuzzer", [f]).values()
    monkeypatch.setenv("EPFUZZ_PRESET", "spec")  # what the harness would run it under then
    assert maintain.finding_inputs(f"{name}_fuzzer", [f]) == {}


def test_fuzz_run_then_triage_and_report(tmp_path):
    run_dir = tmp_path / "run"
    # bounded in executions per job (--time is only a cap), so that a loaded machine runs the same work
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "deepep_v2_dispatch", "--time", "600", "--jobs", "2",
                        "--max-execs", "1500", "--seed", "2", "--run-dir", str(run_dir)], capture_output=True,
                       text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 1, p.stderr[-2000:]
    keep = tmp_path / "regressions"
    keep.mkdir()
    assert cli(["triage", str(run_dir), "--keep", str(keep)]) == 1
    kept = [load_case(c) for c in keep.glob("*.json")]
    assert kept and len({c.signature for c in kept}) == len(kept)
    # minimized representatives: no single removal or simplification keeps the finding. (It read
    # "at most 2 overtakes", which a 1-minimal adaptive-routing case with 3 broke whenever the
    # 25 s run happened to find one.)
    sim = get_backend("sim")
    for c in kept:
        kind = sim.run(c.scenario, get_protocol(c.scenario.protocol)).violation.kind
        assert is_one_minimal(c.scenario, reproduces(sim, get_protocol(c.scenario.protocol), 1, 0.5, kind)), c.name
    assert cli(["triage", str(run_dir), "--keep", str(keep)]) == 1  # a second pass adds nothing
    assert len(list(keep.glob("*.json"))) == len(kept)
    assert cli(["report", str(run_dir)]) == 0
    text = (run_dir / "report.md").read_text()
    assert "Findings by root cause" in text and "exec/s" in text
    assert (run_dir / "report.png").stat().st_size > 1000


def test_the_docs_name_every_option_the_options_file_sets_and_what_jobs_runs():
    """continuous.md listed only max_len = 256 (the file sets len_control and dict too) and said `make fuzz
    JOBS=N` ran N libFuzzer workers, where the default engine is the guided one (cf trial 8)."""
    from epfuzz.continuous.ossfuzz import options

    doc = (ROOT / "docs" / "continuous.md").read_text()
    keys = [line.split(" = ")[0] for line in options("x_fuzzer").splitlines() if " = " in line]
    assert keys == ["max_len", "len_control", "dict"]
    assert all(f"`{k} = " in doc for k in keys), keys
    assert "libFuzzer workers" not in doc and "worker processes of the default guided engine" in doc


@pytest.mark.parametrize("action", ["prune", "merge"])
def test_an_interrupted_prune_or_merge_says_the_corpus_is_as_it_was(tmp_path, monkeypatch, capsys, action):
    """Ctrl-C during `epfuzz corpus prune` exited 130 without a word about the corpus (cf trial, polish)."""
    import os
    import signal

    h = "deepep_v2_dispatch_fixed_fuzzer"
    corpus = tmp_path / "corpus"
    shutil.copytree(ROOT / "corpus" / h, corpus)
    before = sorted(p.name for p in corpus.iterdir())

    def interrupted(*_: object) -> None:  # Ctrl-C while libFuzzer's -merge runs
        os.kill(os.getpid(), signal.SIGINT)
        maintain.proc.check_stopped()

    monkeypatch.setattr(maintain, "_merge", interrupted)
    src = tmp_path / "src"
    src.mkdir()
    args = ["corpus", "prune", h, str(corpus)] if action == "prune" else ["corpus", "merge", h, str(corpus), str(src)]
    assert cli(args) == 128 + signal.SIGINT
    err = capsys.readouterr().err
    what = "nothing removed" if action == "prune" else "nothing added"
    assert err == (f"epfuzz: corpus {action} stopped by signal 2 before changing {corpus.resolve()}: it is as it was "
                   f"({what})\n")
    assert sorted(p.name for p in corpus.iterdir()) == before
