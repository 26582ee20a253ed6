"""A layout whose expected data image cannot be made (a plug-in's: a token size not a multiple of 16 bytes, more
tokens in a channel than it has slots, fewer counts than channels) raises when its memory is made, whether or not
a run reads the data region: with the region made only when read, such runs passed silently (review, issue 31)."""

from __future__ import annotations

import pytest

from epfuzz.model.epoch import expected_data, joins
from epfuzz.protocols.base import Layout
from epfuzz.sim.memory import Memory, Starts

BAD = [Layout(1, 1, 16, 2, (2,)), Layout(2, 1, 8, 2, (1, 1)), Layout(1, 2, 24, 2, (2,)), Layout(2, 2, 16, 2, (1,))]
GOOD = [Layout(1, 1, 16, 2, (1,)), Layout(2, 3, 32, 2, (3, 0)), Layout(1, 1, 16, 2, (0,))]


@pytest.mark.parametrize("lay", BAD, ids=repr)
def test_a_layout_whose_image_cannot_be_made_raises_at_every_memory(lay: Layout) -> None:
    assert not joins(lay)
    with pytest.raises((ValueError, IndexError)):
        expected_data(lay, 0)
    starts = Starts()
    for _ in range(2):  # the configuration's second run too: the check is marked done only once it passed
        with pytest.raises((ValueError, IndexError)):
            Memory(lay, starts)


@pytest.mark.parametrize("lay", GOOD, ids=repr)
def test_a_layout_that_joins_makes_no_image_up_front(lay: Layout) -> None:
    assert joins(lay)
    starts = Starts()
    Memory(lay, starts)
    assert starts.checked and not starts.images  # the image waits until something reads the data region


def test_equal_layouts_share_one_expected_image() -> None:
    """`expected_data` keeps its images by layout value (its lru_cache): fresh configurations make new but equal
    layout objects, and `Starts` finds their image there; `joins`, added beside it, once took its decorator."""
    a, b = Layout(2, 3, 32, 2, (3, 0)), Layout(2, 3, 32, 2, (3, 0))
    assert a is not b and expected_data(a, 5) is expected_data(b, 5)
