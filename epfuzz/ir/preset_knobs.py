"""Which knobs each platform preset pins, and to what: `epfuzz list --presets`, generated from `PRESETS`.

An author writing an `expect` per preset needs to know what a preset leaves free (is adaptive routing
fuzzed under `no-ro`? is `mr_relaxed` under `mlx5-pci-atomic`?); the presets' docs say it in prose, and
an author's trial recovered it by decoding the knobs of 56 runs' findings. This table is read from the
preset definitions and the scenario schema, so it cannot drift from what the fuzzer does.
"""

from __future__ import annotations

from epfuzz.ir.presets import PLATFORM_FIELDS, PRESETS, Preset
from epfuzz.ir.scenario import iter_leaf_fields


def _values(spec: object) -> str:
    """A free field's values as the fuzzer draws them: 'False|True', '0|4', '1|2'."""
    options = getattr(spec, "options", None)
    if options:
        return "|".join(str(o) for o in options)
    lo, hi = getattr(spec, "lo", None), getattr(spec, "hi", None)
    if isinstance(lo, int) and isinstance(hi, int):
        return "|".join(str(v) for v in range(lo, hi + 1)) if hi - lo < 8 else f"{lo}..{hi}"
    return "False|True"


def platform_knobs() -> list[tuple[str, str]]:
    """(dotted path, values the fuzzer draws) of every platform knob, in codec order."""
    return [(path, _values(spec)) for path, spec in iter_leaf_fields() if path in PLATFORM_FIELDS]


def knobs_of(preset: Preset) -> list[tuple[str, str]]:
    """(knob, 'pinned VALUE' or 'free (VALUES)') of each platform knob under `preset`."""
    return [(path, f"pinned {preset.fixed[path]}" if path in preset.fixed else f"free ({values})")
            for path, values in platform_knobs()]


def summary(preset: Preset) -> str:
    """One line: 'pins a=1, b=False; free: c, d' (knob names without `knobs.`)."""
    short = [(path.split(".", 1)[1], path) for path, _ in platform_knobs()]
    pins = ", ".join(f"{name}={preset.fixed[path]}" for name, path in short if path in preset.fixed) or "nothing"
    free = ", ".join(name for name, path in short if path not in preset.fixed) or "none"
    return f"pins {pins}; free: {free}"


def table() -> list[str]:
    """`epfuzz list --presets`: per preset, each platform knob pinned (its value) or free (the values fuzzed)."""
    knobs = platform_knobs()
    width = max(len(p) for p, _ in knobs)
    out = []
    for preset in PRESETS.values():
        out.append(f"{preset.name} (model {preset.model}): {preset.doc}")
        out += [f"  {path:<{width}}  {cell}" for path, cell in knobs_of(preset)]
    out.append("every other scenario field (knobs.mr_relaxed, knobs.reorder_window, signal.*, gpu.*, ...) is an "
               "application or test knob: no preset pins it; a protocol's `fixed` may, else the fuzzer varies it")
    return out


def section() -> list[str]:
    """The presets section of `epfuzz list`: each preset's doc and, under it, `summary`."""
    return [line for p in PRESETS.values() for line in (f"  {p.name}: {p.doc}", f"    {summary(p)}")]
