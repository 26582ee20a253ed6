"""Each optional extra installs what the feature that names it imports.

A pip user trial installed `epfuzz[cuda]` and got torch, while the cuda backend's op interpreter
needs CuPy ("cuda: unavailable: CuPy is not installed"): the extra named in a message must bring the
module the message is about. Read from pyproject.toml, no install (the wheel test installs).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from epfuzz.backends import cuda_interp
from epfuzz.infra.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

#: the PyPI distributions that provide an importable module, where the names differ
PROVIDERS = {"mypyc": ("mypy",), "cupy": ("cupy-cuda12x", "cupy-cuda13x")}


def _names(extra: str) -> set[str]:
    return {re.split(r"[\[<>=;!~ ]", req, maxsplit=1)[0].lower() for req in OPTIONAL[extra]}


@pytest.mark.parametrize("module", sorted(EXTRAS))
def test_the_extra_a_message_names_installs_that_module(module: str):
    names = _names(EXTRAS[module])
    assert names & set(PROVIDERS.get(module, (module,))), (module, EXTRAS[module], names)


def test_the_cuda_extra_brings_cupy_with_its_cuda_libraries_and_torch():
    cupy = next(r for r in OPTIONAL["cuda"] if r.startswith("cupy-"))
    # [ctk]: NVRTC and the CUDA runtime from PyPI, so the machine needs a driver, not a toolkit
    assert cupy.startswith("cupy-cuda12x[ctk]"), cupy
    assert "torch" in _names("cuda")


def test_without_cupy_the_cuda_backend_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    ok, why = cuda_interp.cupy_available()
    assert not ok and why.endswith(f"{sys.executable} -m pip install 'epfuzz[cuda]'"), why


def test_the_docs_say_what_the_cuda_extra_brings():
    for page in ("README.md", "docs/usage.md", "docs/backends.md"):
        text = (ROOT / page).read_text()
        assert "cupy-cuda12x" in text, page
    assert "CUDA 12" in (ROOT / "docs/backends.md").read_text()
