"""The project as one tar for the guest: what goes in, what stays out, and that it unpacks."""

from __future__ import annotations

import io
import subprocess
import tarfile

from epfuzz.guest import vm_tree


def test_the_tar_holds_the_project_and_leaves_out_environments_caches_and_runs(tmp_path):
    """The host's compiled emulator stays out too: the guest's Python runs the pure sources."""
    for name in ("epfuzz/a.py", "epfuzz/sub/b.py", "harnesses/h_fuzzer.py", "corpus/h_fuzzer/seed", "README.md",
                 ".venv/lib/x.py", ".git", "runs/r/finding.json", "epfuzz/__pycache__/a.cpython-311.pyc",
                 "epfuzz.egg-info/PKG-INFO", "tests/guest/c.pyc",
                 "epfuzz/sim/engine.cpython-311-x86_64-linux-gnu.so", "epfuzz/_core_manifest.json",
                 "epfuzz/_core__mypyc.cpython-311-x86_64-linux-gnu.so"):
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(name)
    (tmp_path / "link").symlink_to(tmp_path / "README.md")
    with tarfile.open(fileobj=io.BytesIO(vm_tree.pack(tmp_path))) as tar:
        members = tar.getmembers()
    files = sorted(m.name.removeprefix("./") for m in members if m.isfile())
    assert files == ["README.md", "corpus/h_fuzzer/seed", "epfuzz/a.py", "epfuzz/sub/b.py", "harnesses/h_fuzzer.py"]
    assert {m.uid for m in members} == {0}


def test_the_prologue_unpacks_the_tar_and_runs_the_command_there(tmp_path):
    src = tmp_path / "src"
    (src / "epfuzz").mkdir(parents=True)
    (src / "epfuzz" / "x.py").write_text("X = 1\n")
    (tmp_path / "tree.tar").write_bytes(vm_tree.pack(src))
    prologue = vm_tree.prologue(str(tmp_path / "tree.tar")).replace(vm_tree.GUEST_ROOT, str(tmp_path / "unpacked"))
    out = subprocess.run(["sh", "-c", prologue + 'pwd; echo "$PYTHONPATH"; cat epfuzz/x.py'], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    assert out[:3] == [str(tmp_path / "unpacked")] * 2 + ["X = 1"]


def test_a_checkout_is_shipped_whole_and_an_installed_package_alone(tmp_path):
    """From a pip install the folder above the package is site-packages: shipping it put the host's
    numpy on the guest's PYTHONPATH ("No module named 'numpy._core._multiarray_umath'")."""
    checkout = tmp_path / "checkout"
    (checkout / "epfuzz").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text('[project]\nname = "epfuzz"\n')
    assert vm_tree.stage(checkout / "epfuzz", tmp_path / "s1") == checkout
    site = tmp_path / "site-packages"
    for name in ("epfuzz/__init__.py", "epfuzz/sim/engine.py", "epfuzz/sim/engine.cpython-311-x86_64-linux-gnu.so",
                 "epfuzz/__pycache__/x.cpython-311.pyc", "numpy/__init__.py", "atheris/__init__.py"):
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(name)
    tree = vm_tree.stage(site / "epfuzz", tmp_path / "s2")
    with tarfile.open(fileobj=io.BytesIO(vm_tree.pack(tree))) as tar:
        files = sorted(m.name.removeprefix("./") for m in tar.getmembers() if m.isfile())
    assert files == ["epfuzz/__init__.py", "epfuzz/sim/engine.py"]
