"""Pinned cells of the safety table (each one is an exhaustive check of a litmus scenario)."""

from __future__ import annotations

import pytest

from epfuzz.triage.safety import Row, cell, rows


@pytest.mark.parametrize("row, preset, verdict", [
    (Row("faa", True, 4, False, False), "mlx5-pci-atomic", "UNSAFE"),   # DeepEP #661
    (Row("faa", False, 4, False, False), "mlx5-pci-atomic", "safe"),    # #674
    (Row("faa", True, 4, False, False), "ib-o9-20", "safe"),
    (Row("faa", True, 4, True, False), "mlx5-pci-atomic", "UNSAFE"),    # the fence does not help
    (Row("faa", True, 0, False, False), "mlx5-default", "safe"),
    (Row("faa", True, 4, False, False), "mlx5-default", "n/a"),
    (Row("write", False, None, False, False), "mlx5-default", "safe"),
    (Row("write", False, None, False, False), "spec", "UNSAFE"),        # adaptive routing
    (Row("write", True, None, False, False), "mlx5-default", "UNSAFE"),  # A2b
    (Row("write_imm", True, None, False, False), "spec", "safe"),
    (Row("send", True, None, True, False), "spec", "safe"),
    (Row("faa", False, 0, True, True), "mlx5-default", "UNSAFE"),       # no order across QPs
    # the READ-based pull axis: a flush READ of the data, then the flag WRITE
    (Row("write", True, None, False, False, "READ"), "mlx5-default", "UNSAFE"),  # IB-read-unfenced, then A2b
    (Row("write", True, None, True, False, "READ"), "spec", "safe"),            # IB-fence-read behind B2a
    (Row("write", True, None, True, True, "READ"), "spec", "UNSAFE"),           # a READ on another QP: xQP
    (Row("write", False, None, False, False, "READ"), "mlx5-default", "safe"),  # strict: A2a orders the flag
])
def test_pinned_cells(row, preset, verdict):
    assert cell(row, preset) == verdict


def test_rows_cover_the_product():
    assert len(rows()) == 16 + 3 * 8 + 8
