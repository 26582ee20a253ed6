"""Plug-in protocols written against the flat layout keep loading after the packages by concern."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import epfuzz


@pytest.mark.parametrize("old,new", sorted(epfuzz.MOVED.items()))
def test_the_flat_name_gives_the_moved_module_with_a_warning(old, new):
    with pytest.warns(DeprecationWarning, match=rf"epfuzz\.{old} moved to {new}"):
        mod = getattr(epfuzz, old)
    assert mod is importlib.import_module(new)


def test_from_epfuzz_import_works_in_a_fresh_interpreter():
    code = "import warnings; warnings.simplefilter('error', DeprecationWarning)\n" \
           "try:\n    from epfuzz import ops\nexcept DeprecationWarning as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "epfuzz.ops moved to epfuzz.ir.ops" in out


def test_a_name_that_never_was_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        epfuzz.nosuch  # noqa: B018


@pytest.mark.parametrize("old,new", sorted(epfuzz.MOVED.items()))
def test_a_submodule_import_by_the_flat_name_gives_the_moved_module(old, new):
    """`from epfuzz.scenario import Scenario` is how plug-ins written before the move begin (the old
    examples/seqflag.py did): a submodule import, which the package's __getattr__ does not see."""
    code = ("import warnings, importlib, sys\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            f"    import epfuzz.{old} as m\n"
            f"assert m is importlib.import_module('{new}'), m\n"
            f"assert sys.modules['epfuzz.{old}'] is m\n"
            "print([str(x.message) for x in w if x.category is DeprecationWarning])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert f"epfuzz.{old} moved to {new}" in out


def test_a_flat_layout_plugin_runs(tmp_path):
    """The tutorial's protocol as it was written before the move (flat imports) loads by --protocol and runs."""
    src = (Path(__file__).resolve().parents[2] / "examples" / "seqflag.py").read_text()
    old = src.replace("from epfuzz.ir import ops", "from epfuzz import ops") \
             .replace("from epfuzz.ir.scenario import Scenario", "from epfuzz.scenario import Scenario")
    assert old != src and "epfuzz.ir" not in old
    (tmp_path / "oldproto.py").write_text(old)
    p = subprocess.run([sys.executable, "-m", "epfuzz", "run", "--protocol", "oldproto:SeqFlag", "-"],
                       input="", capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert "seqflag" in p.stdout.lower(), p.stdout
