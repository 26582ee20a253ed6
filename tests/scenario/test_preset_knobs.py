"""`epfuzz list --presets` (an author's trial, M2: which knobs does a preset pin? recovered by decoding the knobs
of 56 runs' findings): the table is generated from PRESETS, and what it says is what the decoder does."""

from __future__ import annotations

import random

import pytest

from epfuzz.cli.commands import main as cli
from epfuzz.encoding import codec
from epfuzz.ir import preset_knobs
from epfuzz.ir.presets import PLATFORM_FIELDS, PRESETS


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_knob_the_table_calls_pinned_or_free_is_so_in_decoded_scenarios(name):
    rng = random.Random(7)
    seen: dict[str, set] = {path: set() for path in PLATFORM_FIELDS}
    for _ in range(300):
        scn = codec.decode(rng.randbytes(rng.randrange(0, 129)), "deepep_v2_dispatch", name)
        for path in seen:
            seen[path].add(_get(scn, path))
    cells = dict(preset_knobs.knobs_of(PRESETS[name]))
    assert set(cells) == PLATFORM_FIELDS
    for path, cell in cells.items():
        if cell.startswith("pinned "):
            assert seen[path] == {PRESETS[name].fixed[path]}, (path, cell, seen[path])
        else:
            assert cell == f"free ({'|'.join(str(v) for v in sorted(seen[path]))})", (path, cell, seen[path])


def _get(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def test_list_presets_prints_each_knob_per_preset_and_list_summarises_them(capsys):
    assert cli(["list", "--presets"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("no-ro (model pcie): "))
    assert lines[at + 1] == "  knobs.nic_relaxed_ordering  pinned False"  # the trial's question: AR free under no-ro
    assert lines[at + 3] == "  knobs.adaptive_routing      free (False|True)"
    assert "knobs.mr_relaxed" in out.splitlines()[-1] and "no preset pins it" in out.splitlines()[-1]
    assert cli(["list"]) == 0
    out = capsys.readouterr().out
    assert ("  mlx5-default: ConnectX defaults: PCI_ATOMIC_MODE=0 (read-modify-write), RO enabled, in-order fabric\n"
            "    pins nic_relaxed_ordering=True, atomic_mode=0, adaptive_routing=False, hca_o920=False; "
            "free: ido, num_functions\n") in out
    assert "    pins nothing; free: nic_relaxed_ordering, atomic_mode, adaptive_routing, hca_o920, ido, " \
           "num_functions" in out
