"""`epfuzz explain --plot`: the finding's timeline as a picture (lanes per QP, PCIe, memory, the receiver),
apart from the explanation's text so that the text needs no plotting library (the plot extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from epfuzz.sim.packets import Packet, PacketKind
from epfuzz.triage.explain import PK_NAMES, Explanation, describe, no_overtake_reason, tlp_name


def _fits(text: str, units: float, pt_per_unit: float, size: float) -> bool:
    """Whether a label fits its bar: labels wider than their bar run into the next ("RDMARDMA")."""
    return len(text) * 0.75 * size <= units * pt_per_unit


def packet_style(p: Packet) -> tuple[str, dict[str, Any]]:
    """(legend label, bar style) of a packet, by what it carries, as the TLP lane colours them: a flag sent by
    a plain WRITE is a signal (the new-user trial's SeqFlag flag was drawn blue, as data: colour was by kind)."""
    if p.region == "data":
        return "data packet", {"color": "tab:blue"}
    if p.kind == PacketKind.ATOMIC:
        return "atomic signal packet", {"color": "tab:orange"}
    return "signal packet", {"color": "tab:purple"}


def title_of(exp: Explanation) -> str:
    """The overtakes that expose the finding, or why none is needed (a title of "proto:" and nothing was
    all a finding with no overtake got: new-user trial item 8)."""
    return f"{exp.run.scenario.protocol}: " + ("; ".join(exp.overtakes[:2])
                                               or f"no overtake: {no_overtake_reason(exp.run)}")


def plot(exp: Explanation, path: Path) -> Path:
    """Lanes for each QP (packets by arrival), PCIe (TLPs by visibility), memory and the receiver."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    run = exp.run
    v = run.violation
    qps = sorted({p.qp for p in run.packets})
    lanes = [f"QP {q}" for q in qps] + ["PCIe", "memory", "receiver"]
    span = max(len(run.packets), sum(t.n for t in run.order), 1)
    width = min(40.0, max(11.0, 0.45 * span))         # wide enough for a label per bar where possible
    fig, ax = plt.subplots(figsize=(width, 1.6 + 0.6 * len(lanes)))
    pt = width * 72 * 0.8 / span                          # points per rank, about (the axes take ~80%)
    overtakers = {id(a) for a, _, _ in run.tlp_inversions}
    shown: dict[str, dict[str, Any]] = {}   # legend: what the bars drawn mean, each kind once (none undrawn)

    def key(label: str, **style: Any) -> dict[str, Any]:
        shown.setdefault(label, style)
        return style

    # packets: x = arrival rank
    for rank, p in enumerate(run.packets):
        y = lanes.index(f"QP {p.qp}")
        label, style = packet_style(p)
        ax.barh(y, 0.9, left=rank, **key(label, **style))
        label = PK_NAMES[p.kind].split()[0][:5]
        if _fits(label, 0.9, pt, 7):
            ax.text(rank + 0.45, y, label, ha="center", va="center", fontsize=7)
    overtaken = {id(b) for _, b, _ in run.tlp_inversions}
    accept = v.position if v is not None and v.kind == "stale-accept" else None
    pos = 0
    for t in run.order:
        late = accept is not None and pos >= accept
        style = (key("overtaker TLP", color="tab:red") if id(t) in overtakers
                 else key("overtaken TLP", color="gold", hatch="//") if id(t) in overtaken
                 else key("signal TLP", color="tab:orange") if t.region != "data"
                 else key("data TLP", color="tab:green"))
        if late:
            key("pale: landed after the accept", color="gray", alpha=0.35)
        ax.barh(lanes.index("PCIe"), t.n * 0.95, left=pos, alpha=0.35 if late else 1.0, **style)
        if _fits(tlp_name(t), t.n * 0.95, pt, 6):
            ax.text(pos + t.n / 2, lanes.index("PCIe"), tlp_name(t), ha="center", va="center", fontsize=6)
        if t.region == "data":
            ax.barh(lanes.index("memory"), t.n * 0.95, left=pos,
                    # cross-hatched: the pale PCIe bars are grey already (a user trial could not tell them apart)
                    **(key("bytes not landed at the accept", facecolor="white", edgecolor="dimgray", hatch="xx")
                       if late else key("data TLP", color="tab:green")))
            label = describe(t, run).split(",")[0]
            if _fits(label, t.n * 0.95, pt, 6):
                ax.text(pos + t.n / 2, lanes.index("memory"), label, ha="center", va="center", fontsize=6)
        pos += t.n
    ax.set_xlim(0, span)
    if accept is not None and v is not None:
        ax.axvline(accept, color="black", linestyle="--")
        right = accept > span / 2                          # write towards the wider side, inside the axes
        ax.text(accept + (-0.3 if right else 0.3), lanes.index("receiver"),
                f"accepts {v.what}: {v.bad_bytes} bytes not landed", ha="right" if right else "left",
                va="center", fontsize=8, clip_on=True)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.5, -0.5)                   # top to bottom; the receiver lane clear of the axis
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # ranks and positions are whole numbers
    ax.set_xlabel("QP lanes: packet arrival rank; PCIe and memory: visibility position in TLPs")
    # the legend names only what was drawn (user audit D13: it named a green bar no plot of #661 has), below
    # the axes, and the picture is cut to what it holds, so no caption runs off its edge
    ax.legend(handles=[Patch(label=k, **st) for k, st in shown.items()], loc="upper center", fontsize=7,
              bbox_to_anchor=(0.5, -0.35 if len(lanes) < 5 else -0.25), ncol=min(4, len(shown)), frameon=False,
              handlelength=3, handleheight=1.5)
    ax.set_title("\n".join(textwrap.wrap(title_of(exp), int(width * 72 / (0.6 * 9)))[:3]), fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path
