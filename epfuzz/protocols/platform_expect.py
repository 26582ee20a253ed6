"""What a protocol's one-word promise means under each preset (issue 29.7).

A built-in protocol says `expect = "clean"` (a fixed form) or `"finding"` (the bug as shipped).
Those words were decided on the PCIe/IB model, where every fixed form is a fix of an RDMA
ordering rule: a strict MR, a PSN-ordered atomic, the signal on the data's QP, a flush read. On
the `nvlink` preset (model "nvlink": GPU stores into a peer GPU, `epfuzz.model.ordering.NVLINK_CLAUSES`)
none of those orders anything. There a signal is an ordering point only when the sender makes it
one (`ordering.gpu_signal_clause`): `__threadfence_system` before it (NV-fence-sys), or
`__threadfence` with the consumer on the same GPU (NV-fence-gpu-same); `st.release.sys` orders a
flag *store* but not an atomic (NV-release-sys). Without one, the weak payload stores may land
after the signal (NV-weak, NV-relaxed-atomic, NV-gpu-scope) and a fixed form accepts stale bytes:
that finding is true, not "a bug in the model".

Measured on the sim (300 random inputs per protocol and GPU setting, nvlink preset, December
2026): every PCIe-fixed protocol (the ten `*_fixed` of patterns 1-10 and `write_imm_signal`) was
clean with `threadfence_system` and with `threadfence` on `same`, and gave findings (28 to 84 in
300) with no fence or `threadfence` to a peer; `st.release.sys` kept the flag-store ones clean
(write_imm_signal, gdr_no_flush_fixed) and not the atomic ones. `inband_tag_fixed` (a checksum,
no signal ordering) was clean in every setting. So under nvlink a promise of "clean" holds for a
scenario whose signal is an ordering point (`NVLINK_CLEAN_WHEN`), and is no promise ("") for the
rest: a finding there is reported as a finding, never as a false alarm.

Table `TRUTH` spells the decision out per (protocol family, preset) with its reason; `refine` is
what `Protocol.expected` applies to a plain-string promise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from epfuzz.ir.scenario import Scenario

#: the preset models under which a PCIe-level "clean" is not a promise by itself
GPU_MODELS = frozenset({"nvlink"})

#: protocols whose "clean" needs no ordering at all (a check of the bytes themselves), on any transport
ORDER_FREE = frozenset({"inband_tag_fixed"})

#: the GPU settings that make every signal (store or atomic) an ordering point at the consumer's scope
NVLINK_CLEAN_WHEN = "gpu.fence == threadfence_system, or gpu.fence == threadfence with gpu.path == same"

#: (protocols, preset) -> (what is true, why). "clean": the promise holds for every scenario of the
#: preset; "clean if fenced": it holds where NVLINK_CLEAN_WHEN does and is no promise elsewhere;
#: "finding": the bug is reachable under the preset; "not reachable": the bug needs a rule the preset lacks
TRUTH: dict[tuple[str, str], tuple[str, str]] = {
    ("fixed", "spec"): ("clean", "the fix orders the signal after the data under every PCIe/IB rule the spec allows"),
    ("fixed", "mlx5-pci-atomic"): ("clean", "a preset pins knobs of spec: fewer orders, none of them unsafe"),
    ("fixed", "mlx5-default"): ("clean", "as above"),
    ("fixed", "ib-o9-20"): ("clean", "as above"),
    ("fixed", "no-ro"): ("clean", "as above"),
    ("fixed", "nvlink"): ("clean if fenced", "an RDMA-ordering fix orders nothing between GPU stores: without "
                          "__threadfence_system (or __threadfence on the same GPU) the payload's weak stores may "
                          "land after the signal (NV-weak, NV-relaxed-atomic, NV-gpu-scope)"),
    ("inband_tag_fixed", "nvlink"): ("clean", "the checksum accepts only a whole token, whatever the order "
                                     "(0 findings in every GPU setting)"),
    ("rdma bug", "nvlink"): ("not reachable when fenced", "deepep_v2_dispatch, flag_write_signal, flush_other_qp, "
                             "gdr_no_flush, deepep_combine, deepep_ll_dispatch, deepep_ll_combine, deepep_direct "
                             "and flush_before_poll are PCIe/IB bugs (RO MR, PCIe atomics, other QP, GDR "
                             "paths): with a system-scope fence 0 findings in 300; unfenced, the NVLink rules alone "
                             "give findings"),
    ("logic bug", "nvlink"): ("finding", "inband_tag, shared_counter, stale_epoch_counter, signal_reset_race, "
                              "early_credit_release, geometry_index, signal_baseline, frozen_flag and init_zeroing "
                              "are wrong on any transport: findings with every GPU setting"),
}

#: issue 30's pairs, measured as above (300 random inputs with sampled schedules per protocol and GPU setting,
#: nvlink preset, December 2026): the seven fixed forms 0 findings with threadfence_system and with threadfence
#: on `same`, 49-77 with no fence or threadfence to a peer (so "clean if fenced"); the four DeepEP-path bad forms
#: 0 when fenced ("rdma bug"); signal_baseline 41, frozen_flag 137, init_zeroing 24 even with threadfence_system
#: ("logic bug": the race is the receiver's own barrier store or its flag value, not the data's order);
#: flush_before_poll and its fixed form (N10, added later; threadfence_system and no fence measured): 0 of 300
#: with threadfence_system, 86 with no fence, each ("rdma bug"; the fixed form "clean if fenced")
#: the GPU-side pairs (gpu2026.py; December 2026, the same 300 inputs): the sender-side source layer is off under
#: nvlink (the payload is the GPU's own stores, no NIC reads a send buffer), so bad and fixed forms alike gave 0
#: findings with threadfence_system and 59-60 with no fence ("rdma bug": not reachable when fenced)
BREADTH_NVLINK = {
    "rdma bug": ("deepep_combine", "deepep_ll_dispatch", "deepep_ll_combine", "deepep_direct", "flush_before_poll",
                 "stale_quiet", "source_no_flush"),
    "logic bug": ("signal_baseline", "frozen_flag", "init_zeroing"),
    # an NVLink-only bug (gpu2026.tma_flag, pinned to threadfence_system on p2p): found under nvlink in 56 of 300
    # sampled inputs, clean under the RDMA presets, where a TMA store is an RDMA WRITE
    "nvlink bug": ("tma_flag",),
    # the receiver cache layer does not look at the preset (epfuzz.model.rxcache; the same 300 inputs): stale_cache
    # 137 findings with threadfence_system, every one RX-stale-line; stale_cache_fixed 0 fenced, 59 with no fence
    # ("clean if fenced", as every fixed form)
    "cache bug": ("stale_cache",),
}


def signal_orders(scn: Scenario) -> bool:
    """Whether the scenario's GPU signal, store or atomic, is an ordering point for its consumer."""
    g = scn.gpu
    return g.fence == "threadfence_system" or (g.fence == "threadfence" and g.path == "same")


def refine(promise: str, scn: Scenario | None, protocol: str) -> str:
    """The verdict a plain-string promise gives for `scn`: unchanged, except "clean" under a GPU
    model for a scenario whose signal orders nothing ("": no promise, see the module doc)."""
    if promise != "clean" or scn is None or protocol in ORDER_FREE:
        return promise
    from epfuzz.ir.presets import model_of

    if model_of(scn.preset) not in GPU_MODELS:
        return promise
    return "clean" if signal_orders(scn) else ""
