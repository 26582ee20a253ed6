"""`make install` rebuilds the compiled core when one of its sources changes: the Makefile's CORE_SRC must name
every module `epfuzz.core.native.COMPILED` lists (one left out ran stale extensions until `make` was forced)."""

from __future__ import annotations

import glob
import re
from pathlib import Path

from epfuzz.core.native import COMPILED

ROOT = Path(__file__).resolve().parents[2]


def _core_src() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^CORE_SRC :=((?:.*\\\n)*.*)$", text, re.M)
    assert m, "no CORE_SRC in the Makefile"
    words = re.sub(r"\$\(wildcard ([^)]+)\)", lambda w: " ".join(glob.glob(str(ROOT / w.group(1)))),
                   m.group(1).replace("\\\n", " "))
    return {str(ROOT / w) for w in words.split()}


def test_every_compiled_module_is_a_core_source() -> None:
    src = _core_src()
    missing = [name for name in COMPILED if str(ROOT.joinpath(*name.split(".")).with_suffix(".py")) not in src]
    assert not missing, f"Makefile CORE_SRC lacks {missing}"
