"""`epfuzz repair`: the smallest protocol change that makes a finding impossible, with its proof (issue 32).

One module per concern: `catalogue` (the named edits), `wrap` (a protocol with edits applied,
its source untouched), `proof` (explore on the case and a stated neighbourhood, then a bounded
guided campaign), `search` (smallest first), `text` (what the CLI prints).
"""

from __future__ import annotations

from epfuzz.repair.catalogue import CATALOGUE, Edit, catalogue
from epfuzz.repair.proof import NEIGHBOURHOOD, Proof, neighbours, prove
from epfuzz.repair.search import Candidate, RepairReport, repair
from epfuzz.repair.wrap import Repaired

__all__ = ["CATALOGUE", "NEIGHBOURHOOD", "Candidate", "Edit", "Proof", "RepairReport", "Repaired", "catalogue",
           "neighbours", "prove", "repair"]
