"""What the docs and the code tell a pip user to install exists: epfuzz is not on PyPI.

A pip-only trial was told `pip install epfuzz` by docs/continuous.md (and the packaged fuzzer's
replay note): there is no such package to fetch. A requirement with an extra (`pip install
'epfuzz[plot]'`) stays: it is what a message says to a user who has epfuzz installed, where pip adds
the extra's packages to the installed epfuzz.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: `pip install epfuzz` (quoted or not, any version spec) without an extra in brackets
BARE = re.compile(r"pip install\s+['\"]?epfuzz(?![\w\[-])")


def test_no_text_tells_a_user_to_fetch_epfuzz_from_pypi():
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "epfuzz").rglob("*.py"),
             *(ROOT / "harnesses").glob("*.py")]
    said = [f"{f.relative_to(ROOT)}: {m.group(0)}" for f in files for m in BARE.finditer(f.read_text())]
    assert not said, said
    assert BARE.search("(`pip install epfuzz`, or") and not BARE.search("pip install 'epfuzz[plot]'")


def test_the_install_docs_say_it_is_not_on_pypi_and_how_to_install_instead():
    for page in ("README.md", "docs/usage.md"):
        text = " ".join((ROOT / page).read_text().split())
        assert "epfuzz is not on PyPI" in text and "pip wheel --no-deps" in text, page
