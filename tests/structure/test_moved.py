"""Plug-in protocols written against the flat layout keep loading after the packages by concern."""

from __future__ import annotations

import importlib
import subprocess
import sys

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
