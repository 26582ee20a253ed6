"""A case file never runs code (issue 29.1): a plug-in is imported only when the command line
names it (`--protocol MOD:ATTR`) or allows its folder (`--allow-plugins PATH`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from epfuzz.protocols.registry import Registry
from tests.hardening.util import ROOT, epfuzz, one_line_error

EVIL = '''
from pathlib import Path
Path(__file__).with_name("RAN").write_text("the plug-in's module ran")
from epfuzz.protocols import REGISTRY
P = REGISTRY.items["deepep_v2_dispatch"]
'''


def _case(folder: Path, protocol: str, name: str = "case.json") -> Path:
    d = json.loads((ROOT / "corpus/regressions/deepep661-c2b.json").read_text())
    d["protocol"] = d["scenario"]["protocol"] = protocol
    d.pop("input")
    d["expect"] = "finding"
    path = folder / name
    path.write_text(json.dumps(d))
    return path


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    """A downloaded CI artifact: a case naming `evil:P`, and evil.py beside it."""
    (tmp_path / "evil.py").write_text(EVIL)
    _case(tmp_path, "evil:P")
    return tmp_path


@pytest.mark.parametrize("cmd", [["replay", "."], ["replay", "--strict", "case.json"], ["run", "case.json"],
                                 ["explain", "case.json"], ["explore", "case.json"], ["minimize", "case.json"]])
def test_a_case_naming_a_plugin_beside_it_does_not_run_it(artifact, cmd):
    p = epfuzz(artifact, *cmd)
    assert not (artifact / "RAN").exists(), p.stdout + p.stderr
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--protocol evil:P" in p.stderr and "--allow-plugins" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_a_case_cannot_import_an_installed_module(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"protocol": "this:x"}))
    for extra in ([], ["--allow-plugins", str(tmp_path)]):  # an allowed folder does not allow site-packages
        p = epfuzz(tmp_path, "run", "s.json", *extra)
        assert "Beautiful is better than ugly" not in p.stdout + p.stderr  # `import this` prints the Zen
        assert p.returncode == 2 and one_line_error(p), p.stdout + p.stderr


@pytest.mark.parametrize("how", [["--protocol", "evil:P"], ["--allow-plugins", "."], ["--allow-plugins", "evil.py"]])
def test_a_plugin_named_or_allowed_on_the_command_line_runs(artifact, how):
    p = epfuzz(artifact, "run", "case.json", *how)
    assert (artifact / "RAN").exists()
    assert p.returncode == 1 and "finding (protocol evil:P" in p.stdout, p.stdout + p.stderr


def test_replay_of_an_allowed_folder_checks_its_cases(artifact):
    p = epfuzz(artifact, "replay", "--strict", ".", "--allow-plugins", ".")
    assert p.returncode == 0 and "1 as expected" in p.stdout, p.stdout + p.stderr


def test_an_allowed_file_allows_that_module_alone(artifact):
    (artifact / "other.py").write_text(EVIL.replace('"RAN"', '"RAN2"'))
    _case(artifact, "other:P", "other.json")
    p = epfuzz(artifact, "run", "other.json", "--allow-plugins", "evil.py")
    assert p.returncode == 2 and not (artifact / "RAN2").exists(), p.stdout + p.stderr


@pytest.mark.parametrize("spec", ["..:P", "a b:P", "mod:", ":P", "mod:P:Q", "os.path:join()"])
def test_a_malformed_plugin_name_is_one_line_exit_2(tmp_path, spec):
    (tmp_path / "s.json").write_text(json.dumps({"protocol": spec}))
    for args in (["run", "s.json"], ["run", "s.json", "--protocol", spec]):
        p = epfuzz(tmp_path, *args)
        assert p.returncode == 2 and one_line_error(p), (args, p.stdout, p.stderr)


def test_an_allow_path_that_is_neither_folder_nor_py_file_is_refused(tmp_path):
    p = epfuzz(tmp_path, "run", "x.json", "--allow-plugins", "nowhere")
    assert p.returncode == 2 and "--allow-plugins nowhere" in p.stderr and one_line_error(p)


def test_a_named_import_leaves_sys_path_as_it_was(tmp_path, monkeypatch):
    (tmp_path / "evil2.py").write_text(EVIL)
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    reg = Registry()
    reg.load_plugin("evil2:P")
    assert sys.path == before and str(tmp_path) not in sys.path
    with pytest.raises(Exception, match="plug-in code runs only when you name it"):
        Registry().get("evil2:P")  # another registry, told nothing: the module loaded here is not trusted there
    sys.modules.pop("evil2", None)


def test_a_plugin_that_exits_or_raises_at_import_is_a_protocol_error(tmp_path):
    (tmp_path / "quits.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('import-time bug')\n")
    (tmp_path / "input").write_bytes(bytes(16))  # raw bytes, which --protocol names the protocol of
    for spec, said in (("quits:P", "sys.exit(0)"), ("raises:P", "import-time bug")):
        p = epfuzz(tmp_path, "run", "input", "--protocol", spec)
        assert p.returncode == 3 and said in p.stderr and "protocol error" in p.stderr, p.stderr
        assert one_line_error(p), p.stderr


@pytest.mark.parametrize(("named", "how"), [("evil:p", " (in upper and lower case only)"), ("evil2:Q", "")])
def test_a_protocol_option_that_names_another_plugin_says_the_names_differ(artifact, named, how):
    """An author's trial: a case of wimm:WimmOtherQP run with --protocol wimm:WimmOtherQp was told "add
    --protocol wimm:WimmOtherQP", as if the option had been ignored. Both names are said now."""
    p = epfuzz(artifact, "run", "case.json", "--protocol", named)
    assert p.returncode == 2 and one_line_error(p), p.stderr
    assert not (artifact / "RAN").exists()
    assert f"is not the plug-in --protocol names ({named}): the names differ{how}," in p.stderr, p.stderr
    assert "give --protocol evil:P" in p.stderr, p.stderr
