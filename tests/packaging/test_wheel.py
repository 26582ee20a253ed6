"""The built wheel, installed into a fresh venv and run from an empty folder, as a user gets it.

Users install with pip: whatever works only from the checkout (files beside the package, the
compiled core `make install` builds in place) is invisible to every other test, which imports
the package from the work tree. This builds the wheel from a copy of the sources (pip fetches the
build backend and the dependencies from PyPI or its cache), installs it alone, and runs the
commands a new user types first.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "corpus" / "regressions" / "deepep661-c2b.json"
SEEDS = "deepep_v2_dispatch_fuzzer"

pytestmark = pytest.mark.slow


def _sources(dest: Path) -> Path:
    """The files git would ship (tracked, and new ones not ignored), without the build outputs of the
    work tree (the compiled core, .venv): building in a copy also leaves the work tree untouched."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _pip(python: Path, *args: str) -> None:
    p = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args], capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = _sources(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    _pip(Path(sys.executable), "wheel", "-q", "--no-deps", "-w", str(out), str(src))
    (whl,) = out.glob("epfuzz-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel and its dependencies only: the epfuzz script's folder."""
    env = tmp_path_factory.mktemp("venv")
    venv.create(env, with_pip=True)
    _pip(env / "bin" / "python", "install", "-q", str(wheel))
    return env / "bin"


def _epfuzz(bin_dir: Path, cwd: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "EPFUZZ", "VIRTUAL_ENV"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([str(bin_dir / "epfuzz"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_wheel_carries_the_license_and_the_kernels_and_no_build_outputs(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    license_text = next(zipfile.ZipFile(wheel).read(n) for n in names if n.endswith("/licenses/LICENSE"))
    assert b"Apache License" in license_text and b"Version 2.0" in license_text
    for kernel in ("cuda_interp.cu", "cuda_mp.cu", "cuda_mp.cpp"):
        assert f"epfuzz/backends/{kernel}" in names
    # the seed corpora, their verdicts and the pinned cases, as the checkout has them (setup.py)
    corpus = sorted(p.relative_to(ROOT / "corpus").as_posix() for p in (ROOT / "corpus").rglob("*")
                    if p.is_file() and not p.name.startswith("."))
    assert f"{SEEDS}.verdicts" in corpus and "regressions/deepep661-c2b.json" in corpus
    assert sorted(n.removeprefix("epfuzz/_corpus/") for n in names if n.startswith("epfuzz/_corpus/")) == corpus
    assert not [n for n in names if n.endswith((".so", "_core_manifest.json", ".pyc"))]


def test_the_wheel_carries_the_docs_and_examples_and_its_description_has_no_dead_links(wheel: Path):
    """A pip-only trial: README.md as the wheel's description linked docs/*.md and LICENSE, which a pip user
    does not have, and nothing pointed at any documentation (setup.py)."""
    z = zipfile.ZipFile(wheel)
    names = z.namelist()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(n.removeprefix("epfuzz/_docs/") for n in names if n.startswith("epfuzz/_docs/")) == pages
    assert {"epfuzz/_examples/__init__.py", "epfuzz/_examples/seqflag.py"} <= set(names)
    meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "Description-Content-Type: text/markdown" in meta
    body = meta.split("\n\n", 1)[1]
    assert body.startswith("# epfuzz") and "DeepEP #661" in body
    assert not re.findall(r"\]\((?!https?:)[^)]*\)", body), "a link to a file of the repository"
    assert "Using epfuzz (`usage.md`)" in body and "`epfuzz list` prints their folder" in " ".join(body.split())


def _carried(bin_dir: Path, cwd: Path) -> dict[str, Path]:
    p = _epfuzz(bin_dir, cwd, "list")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split("files this install carries:\n")[1].splitlines()
    return {line.split(":")[0].split(" (")[0].strip(): Path(line.rsplit(": ", 1)[1]) for line in lines}


def test_list_and_help_texts_name_the_installed_docs(installed: Path, tmp_path: Path):
    where = _carried(installed, tmp_path)
    site = installed.parent / "lib"
    assert where["documentation"].name == "_docs" and site in where["documentation"].parents
    assert (where["documentation"] / "index.md").is_file() and (where["examples"] / "seqflag.py").is_file()
    assert (where["cases and seed corpora"] / "regressions" / CASE.name).is_file()
    help_text = " ".join(_epfuzz(installed, tmp_path, "fuzz", "--help").stdout.split())
    assert "(search.md of the documentation, which epfuzz list locates)" in help_text
    assert (where["documentation"] / "search.md").is_file() and "docs/" not in help_text


def test_the_readmes_case_path_and_the_tutorials_examples_from_a_pip_install(installed: Path, tmp_path: Path):
    """The README's `corpus/regressions/...` is refused in one line naming the installed copy (not read in its
    place); the tutorial's `examples.seqflag:SeqFlagAtomic` runs once the shipped examples are copied in."""
    where = _carried(installed, tmp_path)
    p = _epfuzz(installed, tmp_path, "run", f"corpus/regressions/{CASE.name}")
    assert p.returncode == 2 and p.stdout == "", p.stdout + p.stderr
    copy = where["cases and seed corpora"] / "regressions" / CASE.name
    assert p.stderr.strip().endswith(f"this install carries it as {copy}") and copy.is_file(), p.stderr
    shutil.copytree(where["examples"], tmp_path / "examples")
    p = _epfuzz(installed, tmp_path, "fuzz", "--protocol", "examples.seqflag:SeqFlagAtomic", "--max-execs", "200",
                "--seed", "1", "--time", "600", "--run-dir", "f")
    assert p.returncode == 0 and "0 bug(s)" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]


def test_list_says_which_emulator_runs_and_how_to_get_the_compiled_one(installed: Path, tmp_path: Path):
    p = _epfuzz(installed, tmp_path, "list")
    assert p.returncode == 0, p.stderr
    sim = next(line for line in p.stdout.splitlines() if line.strip().startswith("sim:"))
    assert "runs pure Python" in sim and "not built in this install" in sim and "epfuzz.core.corebuild" in sim, sim
    assert "protocols:" in p.stdout and "deepep_v2_dispatch " in p.stdout


def test_run_explain_and_a_fuzz_campaign_work_from_an_empty_folder(installed: Path, tmp_path: Path):
    shutil.copy(CASE, tmp_path / "case.json")
    p = _epfuzz(installed, tmp_path, "run", "case.json")
    assert p.returncode == 1 and "finding" in p.stdout and "C2b" in p.stdout, p.stdout + p.stderr
    p = _epfuzz(installed, tmp_path, "explain", "case.json")
    assert p.returncode == 1 and "overtakes" in p.stdout and "C2b" in p.stdout, p.stdout + p.stderr
    p = _epfuzz(installed, tmp_path, "fuzz", "--protocol", "deepep_v2_dispatch", "--engine", "guided", "--time",
                "600", "--max-execs", "3000", "--seed", "1", "--run-dir", "r")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "bug(s) by root cause" in p.stdout and "deepep_v2_dispatch|spec|stale-accept|" in p.stdout
    assert list((tmp_path / "r").glob("finding-*.json"))


def test_a_missing_optional_extra_is_named_with_exit_2_not_reported_as_a_bug(installed: Path, tmp_path: Path):
    shutil.copy(CASE, tmp_path / "case.json")
    p = _epfuzz(installed, tmp_path, "explain", "case.json", "--plot", "t.png")
    assert p.returncode == 2, p.stdout + p.stderr
    # this install's own pip: a bare `pip install 'epfuzz[plot]'` elsewhere could fetch anyone's "epfuzz"
    assert re.fullmatch(r"epfuzz: explain --plot needs matplotlib: \S+/python\S* -m pip install 'epfuzz\[plot\]'",
                        p.stderr.strip()), p.stderr
    (tmp_path / "run").mkdir()
    p = _epfuzz(installed, tmp_path, "report", "run")
    assert p.returncode == 2 and "-m pip install 'epfuzz[plot]'" in p.stderr and "a bug in epfuzz" not in p.stderr


def _shipped_seeds(wheel: Path) -> set[str]:
    prefix = f"epfuzz/_corpus/{SEEDS}/"
    return {n.removeprefix(prefix) for n in zipfile.ZipFile(wheel).namelist() if n.startswith(prefix)}


def test_the_harnesses_and_their_seeds_work_from_an_empty_folder(wheel: Path, installed: Path, tmp_path: Path):
    p = _epfuzz(installed, tmp_path, "list")
    assert f"  {SEEDS}\n" in p.stdout.split("protocols:")[0], p.stdout
    # the guided engine starts from the shipped seeds: those that add features are its first corpus entries
    p = _epfuzz(installed, tmp_path, "fuzz", "deepep_v2_dispatch", "--engine", "guided", "--time", "600",
                "--max-execs", "300", "--seed", "1", "--run-dir", "g")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "deepep_v2_dispatch|spec|stale-accept|" in p.stdout
    kept = {f.name for f in (tmp_path / "g" / "corpus").iterdir()}
    assert kept & _shipped_seeds(wheel), kept
    # the libFuzzer engine: the package's entry script, the shipped seed folder read by libFuzzer
    p = _epfuzz(installed, tmp_path, "fuzz", "deepep_v2_dispatch_fixed", "--engine", "libfuzzer", "--time", "600",
                "--max-execs", "300", "--seed", "1", "--run-dir", "l")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "300 execs" in p.stdout and "0 bug(s)" in p.stdout, p.stdout
    log = (tmp_path / "l" / "job0.log").read_text()
    assert "_corpus/deepep_v2_dispatch_fixed_fuzzer" in log and "seed corpus: files: " in log, log[-2000:]
    # corpus upkeep names a harness the same way
    p = _epfuzz(installed, tmp_path, "corpus", "prune", "deepep_v2_dispatch", "g/corpus")
    assert p.returncode == 0 and "pruned g/corpus" in p.stdout, p.stdout + p.stderr


@pytest.mark.slow
def test_the_compiled_core_builds_in_a_pip_install_as_list_says(wheel: Path, tmp_path_factory: pytest.TempPathFactory):
    """User audit D2: `epfuzz list`'s advice (pip install 'epfuzz[core]', then python -m epfuzz.core.corebuild)
    failed in site-packages: mypy took site-packages as the package root and stopped at its typing_extensions.py."""
    env = tmp_path_factory.mktemp("venv-core")
    venv.create(env, with_pip=True)
    _pip(env / "bin" / "python", "install", "-q", f"{wheel}[core]")
    empty = tmp_path_factory.mktemp("empty")
    p = subprocess.run([str(env / "bin" / "python"), "-m", "epfuzz.core.corebuild"], cwd=empty, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0 and "compiled emulator built" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    p = _epfuzz(env / "bin", empty, "list")
    sim = next(line for line in p.stdout.splitlines() if line.strip().startswith("sim:"))
    assert "runs compiled" in sim, sim
    shutil.copy(CASE, empty / "case.json")
    p = _epfuzz(env / "bin", empty, "run", "case.json")
    assert p.returncode == 1 and "C2b" in p.stdout, p.stdout + p.stderr
