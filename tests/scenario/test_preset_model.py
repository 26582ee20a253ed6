"""`model_of`: the one place a scenario's preset name becomes the ordering model the sim applies."""

from __future__ import annotations

from epfuzz.ir.presets import PRESETS, model_of
from epfuzz.sim.nvlink import is_nvlink


def test_model_of_every_preset() -> None:
    models = {name: model_of(name) for name in PRESETS}
    assert models == {name: p.model for name, p in PRESETS.items()}
    assert {"pcie", "pcie-ro-only", "mixed", "nvlink"} <= set(models.values())


def test_unknown_preset_is_the_pcie_model() -> None:
    assert model_of("no-such-preset") == "pcie"


def test_is_nvlink_follows_the_model() -> None:
    from epfuzz.encoding import codec

    for name in PRESETS:
        scn = codec.decode(b"", "dispatch_any", name)
        assert is_nvlink(scn) == (PRESETS[name].model == "nvlink"), name
