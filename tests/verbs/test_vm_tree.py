"""The project as one tar for the guest: what goes in, what stays out, and that it unpacks."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile

import pytest

from epfuzz.guest import vm_tree
from tests.conftest import ROOT


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


@pytest.fixture
def plugin_folder(tmp_path, monkeypatch):
    """A user's folder holding a copy of the tutorial's plug-in (as guestplug_one.py), made the current
    folder as the user's is; the process forgets the plug-in afterwards."""
    from epfuzz.protocols import REGISTRY

    folder = tmp_path / "user"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "seqflag.py", folder / "guestplug_one.py")
    monkeypatch.chdir(folder)
    monkeypatch.setattr(REGISTRY, "loaded", dict(REGISTRY.loaded))
    monkeypatch.setattr(REGISTRY.policy, "named", set(REGISTRY.policy.named))
    yield folder
    for name in [m for m in sys.modules if m.startswith("guestplug_")]:
        del sys.modules[name]


def test_a_single_file_plugin_travels_and_loads_in_its_folder_as_on_the_host(plugin_folder, tmp_path):
    """`epfuzz run --backend verbs --protocol crossflag:CrossFlag` booted the guest, which had the project
    alone: "No module named 'crossflag'" after 90 s (new-user trial item 4). The plug-in's module file goes
    in the command share, and the shell line the guest runs unpacks it and enters its folder, where a fresh
    `python3 -P` (the guest's interpreter flags) loads it by the same name."""
    from epfuzz.protocols import load_plugin

    load_plugin("guestplug_one:SeqFlag")
    files, enter = vm_tree.plugin_shipment("guestplug_one:SeqFlag")
    assert set(files) == {vm_tree.PLUGIN_TAR}
    with tarfile.open(fileobj=io.BytesIO(files[vm_tree.PLUGIN_TAR])) as tar:
        assert [(m.name, m.uid) for m in tar.getmembers()] == [("guestplug_one.py", 0)]
    share = tmp_path / "cmd"
    share.mkdir()
    (share / vm_tree.PLUGIN_TAR).write_bytes(files[vm_tree.PLUGIN_TAR])
    guest = tmp_path / "guest-plugin"
    shell = enter.replace(vm_tree.GUEST_PLUGIN, str(guest)).replace("/mnt/cmd", str(share))
    load = (f"{sys.executable} -P -c 'from epfuzz.protocols import load_plugin, REGISTRY; "
            "p = load_plugin(\"guestplug_one:SeqFlag\"); import sys; print(sys.modules[\"guestplug_one\"].__file__); "
            "print(any(\"guest-plugin\" in x for x in sys.path))'")
    out = subprocess.run(["sh", "-c", shell + load], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == [str(guest / "guestplug_one.py"), "False"], out.stderr


def test_the_modules_a_plugin_imports_from_its_folder_travel_with_it(plugin_folder, tmp_path):
    """`myproto.py` doing `import myhelpers` loaded on the host (its folder is on sys.path while it is imported)
    and failed in the guest with "No module named 'myhelpers'": only the plug-in's own file travelled
    (new-user trial, leftover item 2). The sources of the modules it imported from its folder, a module and a
    package's imported files, travel beside it; a file there that it does not import stays home."""
    from epfuzz.protocols import load_plugin

    (plugin_folder / "guestplug_help.py").write_text("BASE = 1\n")
    (plugin_folder / "guestplug_hpkg" / "sub").mkdir(parents=True)
    (plugin_folder / "guestplug_hpkg" / "__init__.py").write_text("")
    (plugin_folder / "guestplug_hpkg" / "sub" / "__init__.py").write_text("")
    (plugin_folder / "guestplug_hpkg" / "sub" / "epoch.py").write_text("def flag(e):\n    return e + 1\n")
    (plugin_folder / "guestplug_hpkg" / "unused.py").write_text("raise SystemExit('never imported')\n")
    (plugin_folder / "notes.py").write_text("raise SystemExit('not the plug-in's')\n")
    src = (plugin_folder / "guestplug_one.py").read_text()
    (plugin_folder / "guestplug_one.py").write_text(
        src + "\nimport guestplug_help  # noqa: E402, F401\n"
        "from guestplug_hpkg.sub.epoch import flag  # noqa: E402, F401\n")
    load_plugin("guestplug_one:SeqFlag")
    files, enter = vm_tree.plugin_shipment("guestplug_one:SeqFlag")
    with tarfile.open(fileobj=io.BytesIO(files[vm_tree.PLUGIN_TAR])) as tar:
        assert sorted(m.name for m in tar.getmembers()) == [
            "guestplug_help.py", "guestplug_hpkg/__init__.py", "guestplug_hpkg/sub/__init__.py",
            "guestplug_hpkg/sub/epoch.py", "guestplug_one.py"]
    share = tmp_path / "cmd"
    share.mkdir()
    (share / vm_tree.PLUGIN_TAR).write_bytes(files[vm_tree.PLUGIN_TAR])
    guest = tmp_path / "guest-plugin"
    shell = enter.replace(vm_tree.GUEST_PLUGIN, str(guest)).replace("/mnt/cmd", str(share))
    load = (f"{sys.executable} -P -c 'from epfuzz.protocols import load_plugin; "
            "load_plugin(\"guestplug_one:SeqFlag\"); import sys; print(sys.modules[\"guestplug_help\"].__file__)'")
    out = subprocess.run(["sh", "-c", shell + load], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.split() == [str(guest / "guestplug_help.py")], out.stderr


def test_a_sibling_module_that_is_not_source_or_too_much_source_is_refused_in_one_line(plugin_folder,
                                                                                         monkeypatch):
    """An extension module beside the plug-in cannot run on the guest's Python; modules of a folder
    below it (a checkout or a virtual environment inside the plug-in's folder) are not its siblings."""
    import types

    from epfuzz.infra.errors import Unsupported
    from epfuzz.protocols import load_plugin

    load_plugin("guestplug_one:SeqFlag")
    deep = types.ModuleType("guestplug_deep")
    deep.__file__ = str(plugin_folder / ".venv" / "guestplug_deep" / "__init__.py")
    monkeypatch.setitem(sys.modules, "guestplug_deep", deep)
    files, _ = vm_tree.plugin_shipment("guestplug_one:SeqFlag")
    with tarfile.open(fileobj=io.BytesIO(files[vm_tree.PLUGIN_TAR])) as tar:
        assert [m.name for m in tar.getmembers()] == ["guestplug_one.py"]
    monkeypatch.setattr(vm_tree, "PLUGIN_MAX_BYTES", 1000)
    with pytest.raises(Unsupported, match="too much to send to the guest") as e:
        vm_tree.plugin_shipment("guestplug_one:SeqFlag")
    assert "\n" not in str(e.value) and str(plugin_folder.resolve()) in str(e.value)
    ext = types.ModuleType("guestplug_ext")
    ext.__file__ = str(plugin_folder / "guestplug_ext.cpython-311-x86_64-linux-gnu.so")
    monkeypatch.setitem(sys.modules, "guestplug_ext", ext)
    with pytest.raises(Unsupported, match="guestplug_ext.*not Python source") as e:
        vm_tree.plugin_shipment("guestplug_one:SeqFlag")
    assert "\n" not in str(e.value)


def test_builtins_and_plugins_the_shipped_checkout_carries_send_nothing(plugin_folder, monkeypatch):
    """examples.seqflag sits at the top of the checkout, which the guest gets whole: it is found there
    by the same name, as before."""
    assert vm_tree.plugin_shipment("dispatch_any") == ({}, "")
    monkeypatch.chdir(ROOT)
    assert vm_tree.plugin_shipment("examples.seqflag:SeqFlag") == ({}, "")


def test_a_package_of_sources_travels_and_one_with_other_files_is_refused_before_a_boot(plugin_folder,
                                                                                         monkeypatch):
    from epfuzz.backends import verbs
    from epfuzz.encoding import codec
    from epfuzz.guest import vm
    from epfuzz.infra.errors import Unsupported
    from epfuzz.protocols import load_plugin

    pkg = plugin_folder / "guestplug_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from guestplug_pkg.sub.proto import SeqFlag\n")
    (pkg / "sub" / "__init__.py").write_text("")
    shutil.move(plugin_folder / "guestplug_one.py", pkg / "sub" / "proto.py")
    load_plugin("guestplug_pkg:SeqFlag")
    files, _ = vm_tree.plugin_shipment("guestplug_pkg:SeqFlag")
    with tarfile.open(fileobj=io.BytesIO(files[vm_tree.PLUGIN_TAR])) as tar:
        assert sorted(m.name for m in tar.getmembers()) == ["guestplug_pkg/__init__.py",
                                                            "guestplug_pkg/sub/__init__.py",
                                                            "guestplug_pkg/sub/proto.py"]
    (pkg / "table.bin").write_bytes(b"\0")
    monkeypatch.setattr(vm, "run", lambda *a, **k: pytest.fail("a guest was booted"))
    scn = codec.load_dict({"protocol": "guestplug_pkg:SeqFlag"})
    with pytest.raises(Unsupported, match="only single-file plug-ins") as e:
        verbs._in_guest(scn, 1)
    assert "\n" not in str(e.value) and "table.bin" in str(e.value)


def test_a_plugin_the_guest_cannot_load_is_one_error_line(tmp_path, capsys, monkeypatch):
    """The guest's failure came back as traceback pieces joined by '|' (the load sat outside the try). pyverbs
    exists only in the guest: the runner is never reached here, so its module stands in for it."""
    import types

    from epfuzz.backends import verbs

    monkeypatch.setitem(sys.modules, "epfuzz.backends.verbs_runner",
                        types.SimpleNamespace(local_runner=lambda: pytest.fail("the scenario ran")))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenario.json").write_text(json.dumps({"protocol": "guestplug_absent:P"}))
    assert verbs.guest_main([str(tmp_path / "scenario.json"), "1"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(verbs.ERROR_MARK), out
    err = verbs._guest_error(out[0])
    assert type(err).__name__ == "InputError" and "No module named 'guestplug_absent'" in str(err)
