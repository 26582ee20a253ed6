"""Under nvlink, what a finding needs is asked of the gpu knobs, not of the NIC knobs the preset pins (an author's
trial, L3: explain of an NVLink finding of chunklanes:ChunkLanes named `PCI atomic mode (knobs.atomic_mode=4),
pinned by the preset` as the knob without which it disappears, and no gpu.* knob). The preset pins those NIC
knobs only to keep the NIC stages from reordering; atomic_mode=0 is no NVLink platform (it made the GPU atomic
the responder's read-modify-write), so the sim's answer there was an artefact."""

from __future__ import annotations

import json

from epfuzz.backends.base import SIGNATURE_FIELDS
from epfuzz.cli.commands import main as cli
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.triage.cause import knobs_to_ask, needs

PLUGIN = "tests.continuous.chunklanes:ChunkLanes"
#: the trial's finding (runs/sweep-chunklanes.ChunkLanes-nvlink/bugs/chunklanes.ChunkLanes-1e0fc4afde.json)
INPUT = "000100000000000001000003"


def _case():
    scn = codec.decode(bytes.fromhex(INPUT), PLUGIN, "nvlink")
    assert scn.gpu.fence == "none" and scn.knobs.atomic_mode == 4
    return scn, get_protocol(PLUGIN)


def test_an_nvlink_finding_needs_its_unfenced_signal_not_the_pinned_atomic_mode():
    scn, proto = _case()
    out = simulate(scn, proto)
    assert out.violation is not None
    got = needs(scn, proto, out.violation.kind, SIGNATURE_FIELDS + ("topology.num_qps",))
    needed = {n.path: n for n in got.knobs}
    assert set(needed) == {"gpu.fence"}, needed
    assert needed["gpu.fence"].without == ("threadfence_system",)  # __threadfence to a peer keeps it
    assert "knobs.atomic_mode" in got.plumbing and "knobs.atomic_mode" not in got.irrelevant
    assert not any(n.path == "knobs.atomic_mode" for n in got.shape)
    assert needed["gpu.fence"].text() == "gpu.fence=none"  # the bug table's knob column (signal.fence is "fence")


def test_under_the_pcie_presets_the_pinned_knobs_are_still_asked():
    scn, _ = _case()
    for preset in ("spec", "mlx5-pci-atomic", "mixed-nvlink-rdma"):
        assert knobs_to_ask(scn.replace(preset=preset), SIGNATURE_FIELDS) == (SIGNATURE_FIELDS, [])


def test_explain_names_the_gpu_fence_and_sets_the_pinned_nic_knobs_apart(tmp_path, capsys):
    case = tmp_path / "bug.json"
    case.write_text(json.dumps(codec.load_dict(_case()[0].to_dict()).to_dict()))
    cli(["explain", str(case), "--protocol", PLUGIN])
    out = capsys.readouterr().out
    block = out[out.index("knobs without which the finding disappears"):]
    assert block.splitlines()[1] == '  gpu.fence=none: not with "threadfence_system"', block
    assert "pinned by the preset" not in block
    assert "knobs the nvlink preset pins only to keep the NIC stages from reordering" in block
