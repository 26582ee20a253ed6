"""docs/plugins.md's API reference is written from the code into the markdown (epfuzz.protocols.apiref): an
author's trial (M3) found its sections were mkdocstrings directives (`::: epfuzz.ir.ops`), empty in the markdown
a pip install carries. The committed text must be what the code gives, and name what a plug-in author needs."""

from __future__ import annotations

from pathlib import Path

from epfuzz.protocols import apiref

PAGE = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def test_the_committed_reference_is_what_the_code_gives():
    text = PAGE.read_text()
    assert apiref.rewrite(text) == text, "stale: run python -m epfuzz.protocols.apiref docs/plugins.md"


def test_the_page_has_no_directive_that_only_the_site_fills_and_shows_the_signatures():
    text = PAGE.read_text()
    assert "\n::: " not in text
    for line in ("#### `ops.WriteImm(qp: int, region: str, offset: int, length: int, imm: int, cq_slot: int",
                 "#### `ops.Read(qp: int, region: str, offset: int, length: int, fence: bool = False)`",
                 "#### `ops.AtomicAdd(qp: int, region: str, offset: int, delta: int, fence: bool = False, "
                 "strong: bool = False)`",
                 "#### `Layout(num_channels: int, slots_per_channel: int, token_bytes: int, max_signals: int, ",
                 "- `slot_offset(channel: int, slot: int) -> int`",
                 "#### `class MemoryView`",
                 "- `u64(region: str, offset: int) -> int`",
                 "- `expect: ExpectRule = \"clean\"`: "):
        assert line in text, line


def test_check_mode_says_which_file_is_stale(tmp_path, capsys):
    page = tmp_path / "p.md"
    page.write_text("x\n<!-- apiref epfuzz.protocols.base: Layout -->\nold text\n<!-- /apiref -->\n")
    assert apiref.main(["--check", str(page)]) == 1
    assert f"stale API reference in {page}" in capsys.readouterr().out
    assert apiref.main([str(page)]) == 0 and apiref.main(["--check", str(page)]) == 0
    assert "old text" not in page.read_text() and "- `token_of(channel: int, slot: int) -> int`" in page.read_text()
