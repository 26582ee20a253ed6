"""`epfuzz corpus manifest` (an author's trial, L2): a plug-in's seed corpus gets the verdict manifest `make seeds`
writes for the built-in corpora, so `replay --strict` checks its seeds where a mapping `expect` left them
UNCHECKED ("293 without an expected verdict", FAIL)."""

from __future__ import annotations

import random

from epfuzz.cases.corpus import manifest_path, read_manifest, sha1
from epfuzz.cli.commands import main as cli

PLUGIN = "tests.continuous.chunklanes:ChunkLanes"


#: four of the trial's seeds (/work/trial-author/w/seeds-cl): two findings under spec (C2b lanes), two clean
TRIAL_SEEDS = ("0101010000000110000a01010100050000f63400000f300000580900004f0700005300000101010302040305a514",
               "01010101000001370206010100000a00000c000100141f0100082f0000090f0100071100002f1b00001000000010090000"
               "123201000c0303020200010002010005000f0a00820400020101031a08220001070e1aab0c100201000000099601000401",
               "0101010100000137020601010000774ee7b27b66ae4f6ae2f8cb0141b7634a5463e94a025f0d02b799030001020700000304"
               "580705040200020305090102010003000a",
               "0000010101010016020900000000010100190106000107030103090fe90200011901010001020510511501")


def _seeds(folder, n=40):
    """The trial's four seeds and `n` - 4 random inputs, each named by its sha1 as libFuzzer names them."""
    rng = random.Random(3)
    folder.mkdir()
    for data in [bytes.fromhex(h) for h in TRIAL_SEEDS] + [rng.randbytes(rng.randrange(8, 129)) for _ in range(n - 4)]:
        (folder / sha1(data)).write_bytes(data)


def test_a_plugin_seed_corpus_gets_a_manifest_that_replay_strict_checks(tmp_path, capsys):
    seeds = tmp_path / "seeds-cl"
    _seeds(seeds)
    assert cli(["replay", "--strict", str(seeds), "--protocol", PLUGIN]) == 1  # the trial: all UNCHECKED
    assert "`epfuzz corpus manifest` writes one" in capsys.readouterr().out
    assert cli(["corpus", "manifest", "--protocol", PLUGIN, str(seeds)]) == 0
    out = capsys.readouterr().out
    preset, verdicts = read_manifest(seeds)
    assert preset == "spec" and len(verdicts) == 40 and set(verdicts.values()) == {"finding", "clean"}
    assert f"wrote {manifest_path(seeds)}: 40 input(s)" in out
    assert "written by `epfuzz corpus manifest --protocol " + PLUGIN in manifest_path(seeds).read_text()
    assert cli(["replay", "--strict", str(seeds), "--protocol", PLUGIN]) == 0
    assert "40 as expected, 0 changed, 0 without an expected verdict" in capsys.readouterr().out
    # a verdict turned round is a CHANGED seed: the manifest is what replay checks
    name, verdict = sorted(verdicts.items())[0]
    text = manifest_path(seeds).read_text().replace(f"{name} {verdict}", f"{name} "
                                                    f"{ {'finding': 'clean', 'clean': 'finding'}[verdict]}")
    manifest_path(seeds).write_text(text)
    assert cli(["replay", str(seeds), "--protocol", PLUGIN]) == 1
    assert f"CHANGED {seeds / name}" in capsys.readouterr().out


def test_a_manifest_for_another_preset_holds_verdicts_for_that_preset_only(tmp_path, capsys):
    seeds = tmp_path / "seeds"
    _seeds(seeds, 12)
    assert cli(["corpus", "manifest", "--protocol", PLUGIN, "--preset", "no-ro", str(seeds)]) == 0
    assert read_manifest(seeds)[0] == "no-ro"
    capsys.readouterr()
    assert cli(["replay", "--strict", "--preset", "no-ro", str(seeds), "--protocol", PLUGIN]) == 0
    assert cli(["replay", "--strict", str(seeds), "--protocol", PLUGIN]) == 1  # decoded under spec: no verdicts
    assert "holds verdicts for preset no-ro, not spec" in capsys.readouterr().out


def test_manifest_refuses_a_missing_folder_and_an_unknown_preset(tmp_path, capsys):
    assert cli(["corpus", "manifest", "--protocol", PLUGIN, str(tmp_path / "nope")]) == 2
    _seeds(tmp_path / "s", 1)
    assert cli(["corpus", "manifest", "--protocol", PLUGIN, "--preset", "no-r0", str(tmp_path / "s")]) == 2
    assert not manifest_path(tmp_path / "s").exists()
