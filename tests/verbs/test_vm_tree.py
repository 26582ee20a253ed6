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
from epfuzz.infra.errors import Unsupported
from epfuzz.protocols import REGISTRY
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
    folder = tmp_path / "user"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "seqflag.py", folder / "guestplug_one.py")
    monkeypatch.chdir(folder)
    monkeypatch.setattr(REGISTRY, "loaded", dict(REGISTRY.loaded))
    monkeypatch.setattr(REGISTRY.policy, "named", set(REGISTRY.policy.named))
    monkeypatch.setattr(REGISTRY, "plugin_modules", dict(REGISTRY.plugin_modules))
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
    out, guest = _as_guest(files, enter, tmp_path,
                           "from epfuzz.protocols import load_plugin, REGISTRY; "
                           "p = load_plugin(\"guestplug_one:SeqFlag\"); import sys; "
                           "print(sys.modules[\"guestplug_one\"].__file__); "
                           "print(any(\"guest-plugin\" in x for x in sys.path))")
    assert out.returncode == 0 and out.stdout.split() == [str(guest / "guestplug_one.py"), "False"], out.stderr


def test_the_modules_a_plugin_imports_from_its_folder_travel_with_it(plugin_folder, tmp_path):
    """`myproto.py` doing `import myhelpers` loaded on the host (its folder is on sys.path while it is imported)
    and failed in the guest with "No module named 'myhelpers'": only the plug-in's own file travelled
    (new-user trial, leftover item 2). The sources of the modules it imported from its folder, a module and a
    package whole (a submodule it imports later is there too), travel beside it; a file of the folder that it
    does not import stays home."""
    from epfuzz.protocols import load_plugin

    (plugin_folder / "guestplug_help.py").write_text("BASE = 1\n")
    (plugin_folder / "guestplug_hpkg" / "sub").mkdir(parents=True)
    (plugin_folder / "guestplug_hpkg" / "__init__.py").write_text("")
    (plugin_folder / "guestplug_hpkg" / "sub" / "__init__.py").write_text("")
    (plugin_folder / "guestplug_hpkg" / "sub" / "epoch.py").write_text("def flag(e):\n    return e + 1\n")
    (plugin_folder / "guestplug_hpkg" / "later.py").write_text("LATER = 2\n")
    (plugin_folder / "notes.py").write_text("raise SystemExit('not the plug-in's')\n")
    src = (plugin_folder / "guestplug_one.py").read_text()
    (plugin_folder / "guestplug_one.py").write_text(
        src + "\nimport guestplug_help  # noqa: E402, F401\n"
        "from guestplug_hpkg.sub.epoch import flag  # noqa: E402, F401\n")
    load_plugin("guestplug_one:SeqFlag")
    files, enter = vm_tree.plugin_shipment("guestplug_one:SeqFlag")
    with tarfile.open(fileobj=io.BytesIO(files[vm_tree.PLUGIN_TAR])) as tar:
        assert sorted(m.name for m in tar.getmembers()) == [
            "guestplug_help.py", "guestplug_hpkg/__init__.py", "guestplug_hpkg/later.py",
            "guestplug_hpkg/sub/__init__.py", "guestplug_hpkg/sub/epoch.py", "guestplug_one.py"]
    out, guest = _as_guest(files, enter, tmp_path,
                           "from epfuzz.protocols import load_plugin; "
                           "load_plugin(\"guestplug_one:SeqFlag\"); import sys, importlib; "
                           "print(sys.modules[\"guestplug_help\"].__file__); "
                           "print(importlib.import_module(\"guestplug_hpkg.later\").__file__)")
    assert out.returncode == 0 and out.stdout.split() == [str(guest / "guestplug_help.py"),
                                                           str(guest / "guestplug_hpkg" / "later.py")], out.stderr


def _as_guest(files, enter, tmp_path, code):
    """Unpack a plug-in shipment as the guest's command share would and run `code` as the guest runs its
    commands (`python3 -P` in the unpacked folder): (the finished process, the unpacked folder)."""
    share = tmp_path / "cmd"
    share.mkdir()
    (share / vm_tree.PLUGIN_TAR).write_bytes(files[vm_tree.PLUGIN_TAR])
    guest = tmp_path / "guest-plugin"
    shell = enter.replace(vm_tree.GUEST_PLUGIN, str(guest)).replace("/mnt/cmd", str(share))
    out = subprocess.run(["sh", "-c", shell + f"{sys.executable} -P -c '{code}'"], capture_output=True, text=True,
                         cwd=ROOT)
    return out, guest


def _members(spec):
    files, _ = vm_tree.plugin_shipment(spec)
    with tarfile.open(fileobj=io.BytesIO(files[vm_tree.PLUGIN_TAR])) as tar:
        return sorted(m.name for m in tar.getmembers())


def _plugin_importing(folder, *lines):
    src = (folder / "guestplug_one.py").read_text()
    (folder / "guestplug_one.py").write_text(src + "".join(f"\n{line}  # noqa: E402, F401" for line in lines) + "\n")


def test_a_checkout_or_environment_beside_the_plugin_sends_none_of_its_modules(plugin_folder, monkeypatch):
    """A module counted as a sibling when its file sat anywhere under a folder of its name: a plug-in beside a
    checkout laid out work/epfuzz/epfuzz/... shipped the checkout's sources it imported (or was refused for
    its extension module). Only a module found in the plug-in's folder by its dotted name's path travels."""
    from epfuzz.protocols import load_plugin

    checkout = plugin_folder / "guestplug_co"
    (checkout / "guestplug_co").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    (checkout / "guestplug_co" / "__init__.py").write_text("")
    (checkout / "guestplug_co" / "util.py").write_text("U = 1\n")
    venv = plugin_folder / ".venv" / "site"
    (venv / "guestplug_deep").mkdir(parents=True)
    (venv / "guestplug_deep" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(checkout))  # installed editable, as the checkout's package is
    monkeypatch.syspath_prepend(str(venv))
    _plugin_importing(plugin_folder, "import guestplug_co.util", "import guestplug_deep")
    load_plugin("guestplug_one:SeqFlag")
    assert sys.modules["guestplug_co.util"].__file__ == str(checkout / "guestplug_co" / "util.py")
    assert _members("guestplug_one:SeqFlag") == ["guestplug_one.py"]


def test_an_installed_plugin_package_sends_itself_alone(plugin_folder, tmp_path, monkeypatch):
    """A pip-installed plug-in package (its folder is site-packages) was refused: "imports numpy._core.
    _multiarray_umath ... not Python source", numpy being imported by epfuzz, not by it. What else sits in
    site-packages, imported or not, stays home."""
    import types

    from epfuzz.protocols import load_plugin

    site = tmp_path / "site-packages"
    (site / "guestplug_inst").mkdir(parents=True)
    (site / "guestplug_inst" / "__init__.py").write_text("from guestplug_inst.proto import SeqFlag\n")
    shutil.move(plugin_folder / "guestplug_one.py", site / "guestplug_inst" / "proto.py")
    (site / "guestplug_np" / "_core").mkdir(parents=True)
    ext = types.ModuleType("guestplug_np._core._umath")
    ext.__file__ = str(site / "guestplug_np" / "_core" / "_umath.cpython-311-x86_64-linux-gnu.so")
    monkeypatch.setitem(sys.modules, ext.__name__, ext)
    monkeypatch.syspath_prepend(str(site))
    load_plugin("guestplug_inst:SeqFlag")
    assert _members("guestplug_inst:SeqFlag") == ["guestplug_inst/__init__.py", "guestplug_inst/proto.py"]


def test_a_linked_sibling_package_travels_through_the_link(plugin_folder, tmp_path):
    """A sibling package that is a link to a folder elsewhere resolved outside the plug-in's folder and was
    left out: the guest said "No module named ...". It travels under the name it was imported by, its files
    (links among them) as what they point to."""
    from epfuzz.protocols import load_plugin

    elsewhere = tmp_path / "elsewhere" / "hpkg"
    elsewhere.mkdir(parents=True)
    (elsewhere / "__init__.py").write_text("")
    (elsewhere / "mod.py").write_text("M = 1\n")
    (tmp_path / "elsewhere" / "shared.py").write_text("S = 1\n")
    (elsewhere / "shared.py").symlink_to(tmp_path / "elsewhere" / "shared.py")
    (plugin_folder / "guestplug_link").symlink_to(elsewhere)
    _plugin_importing(plugin_folder, "import guestplug_link.mod")
    load_plugin("guestplug_one:SeqFlag")
    files, _ = vm_tree.plugin_shipment("guestplug_one:SeqFlag")
    with tarfile.open(fileobj=io.BytesIO(files[vm_tree.PLUGIN_TAR])) as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert got == {"guestplug_link/__init__.py": b"", "guestplug_link/mod.py": b"M = 1\n",
                   "guestplug_link/shared.py": b"S = 1\n", "guestplug_one.py": (plugin_folder / "guestplug_one.py")
                   .read_bytes()}
    (elsewhere / "loop").symlink_to(elsewhere)
    with pytest.raises(Unsupported, match="loop") as e:
        vm_tree.plugin_shipment("guestplug_one:SeqFlag")
    assert "\n" not in str(e.value) and "guestplug_link" in str(e.value)


def test_an_object_the_plugin_puts_in_sys_modules_runs_no_code_when_its_files_are_looked_for(plugin_folder):
    """Any object may sit in sys.modules (a lazy module's stand-in): its file was read with getattr(mod,
    "__file__"), which ran its __getattr__, and what that raised ended the shipment."""
    from epfuzz.protocols import load_plugin

    (plugin_folder / "guestplug_lazy.py").write_text(
        "import sys\nclass Lazy:\n    def __getattr__(self, name):\n        raise RuntimeError(f'ran for {name}')\n"
        "sys.modules['guestplug_lazyobj'] = Lazy()\n")
    _plugin_importing(plugin_folder, "import guestplug_lazy")
    load_plugin("guestplug_one:SeqFlag")
    assert _members("guestplug_one:SeqFlag") == ["guestplug_lazy.py", "guestplug_one.py"]


def test_a_sibling_module_that_is_not_source_or_too_much_source_is_refused_in_one_line(plugin_folder,
                                                                                         monkeypatch):
    """A module imported beside the plug-in that is no Python source cannot run on the guest's Python (a
    bytecode-only module here; an extension alike); the 4 MiB bound holds for the plug-in and its modules
    together, in one check."""
    import py_compile

    from epfuzz.protocols import load_plugin

    load_plugin("guestplug_one:SeqFlag")
    monkeypatch.setattr(vm_tree, "PLUGIN_MAX_BYTES", 1000)
    with pytest.raises(Unsupported, match="too much to send to the guest") as e:
        vm_tree.plugin_shipment("guestplug_one:SeqFlag")
    assert "\n" not in str(e.value) and str(plugin_folder.resolve()) in str(e.value)
    monkeypatch.setattr(vm_tree, "PLUGIN_MAX_BYTES", 4 << 20)
    del sys.modules["guestplug_one"]
    monkeypatch.setattr(REGISTRY, "loaded", {n: p for n, p in REGISTRY.loaded.items() if "guestplug" not in n})
    (plugin_folder / "guestplug_bc_src.py").write_text("B = 1\n")
    py_compile.compile(str(plugin_folder / "guestplug_bc_src.py"), cfile=str(plugin_folder / "guestplug_bc.pyc"))
    (plugin_folder / "guestplug_bc_src.py").unlink()
    _plugin_importing(plugin_folder, "import guestplug_bc")
    load_plugin("guestplug_one:SeqFlag")
    with pytest.raises(Unsupported, match="plug-in 'guestplug_one:SeqFlag' imports guestplug_bc from .*not Python "
                                          "source") as e:
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
    monkeypatch.setattr(vm_tree, "PLUGIN_MAX_BYTES", 50)  # one check, for the package and what it imports
    with pytest.raises(Unsupported, match=r"\(.*guestplug_pkg\) and the modules it imports beside it .* too much"):
        vm_tree.plugin_shipment("guestplug_pkg:SeqFlag")
    monkeypatch.setattr(vm_tree, "PLUGIN_MAX_BYTES", 4 << 20)
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
