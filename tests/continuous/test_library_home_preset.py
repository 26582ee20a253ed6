"""The library's campaigns and harness default to the protocol's home preset, as the CLI and the harness entry
point do (`cases.replay.raw_preset`): `fuzz`, `fuzz_guided` and `Harness` defaulted to "spec", so a library
caller fuzzed tma_flag where its bug is not (operator trial 1205, item 7)."""

from __future__ import annotations

import pytest

from epfuzz.cases.replay import raw_preset


class _Reached(Exception):
    """The campaign got as far as its engine, with the preset it chose."""


def test_the_harness_defaults_to_the_protocols_home_preset():
    from epfuzz.continuous.harness import Harness

    assert raw_preset("tma_flag", None) == "nvlink"  # what the CLI decodes a raw input under
    assert Harness("tma_flag").preset == "nvlink"
    assert Harness("ro_only_strict_mr_fixed").preset == "mlx5-ro-only"
    assert Harness("deepep_v2_dispatch").preset == "spec"
    assert Harness("tma_flag", preset="spec").preset == "spec"  # a preset named is kept


def test_the_guided_campaign_defaults_to_the_protocols_home_preset(tmp_path, monkeypatch):
    from epfuzz.campaign import guided

    seen: list[str] = []

    def engine(name, protocol, preset, *rest, **kw):
        seen.append(preset)
        raise _Reached

    monkeypatch.setattr(guided, "_Campaign", engine)
    with pytest.raises(_Reached):
        guided.fuzz_guided("tma_flag_fuzzer", 5, run_dir=tmp_path / "a", progress=False)
    with pytest.raises(_Reached):
        guided.fuzz_guided(None, 5, protocol="mixed_plane", run_dir=tmp_path / "b", progress=False)
    with pytest.raises(_Reached):
        guided.fuzz_guided("tma_flag_fuzzer", 5, preset="spec", run_dir=tmp_path / "c", progress=False)
    assert seen == ["nvlink", "mixed-nvlink-rdma", "spec"]


def test_the_libfuzzer_campaign_defaults_to_the_protocols_home_preset(tmp_path, monkeypatch):
    from epfuzz.campaign import libfuzzer

    seen: list[list[str]] = []

    def jobs(cmd, tail, *rest, **kw):
        seen.append([x for x in tail if x.startswith("--preset=")])
        raise _Reached

    monkeypatch.setattr(libfuzzer, "_Jobs", jobs)
    with pytest.raises(_Reached):
        libfuzzer.fuzz("tma_flag_fuzzer", 5, run_dir=tmp_path / "a", progress=False)
    with pytest.raises(_Reached):
        libfuzzer.fuzz("deepep_v2_dispatch_fuzzer", 5, preset="nvlink", run_dir=tmp_path / "b", progress=False)
    assert seen == [["--preset=nvlink"], ["--preset=nvlink"]]
