"""One test per cell of PCIe r5.0 Table 2-40 (later row passing earlier column)."""

from __future__ import annotations

import pytest

from epfuzz.model.ordering import RULES, Attrs, TlpType, may_pass, passing_rule_name

P, R, N, C = TlpType.POSTED, TlpType.READ, TlpType.NP_DATA, TlpType.COMPLETION
plain = {t: Attrs(t) for t in TlpType}


def test_table_is_complete():
    assert set(RULES) == {(a, b) for a in TlpType for b in TlpType}


# -- A2a/A2b: posted passing posted
def test_A2a_posted_must_not_pass_posted():
    assert not may_pass(plain[P], plain[P])


def test_A2b_posted_with_ro_may_pass_posted():
    assert may_pass(Attrs(P, ro=True), plain[P])
    assert passing_rule_name(Attrs(P, ro=True), plain[P]) == "A2b"


def test_A2b_ro_of_the_earlier_does_not_help():
    assert not may_pass(plain[P], Attrs(P, ro=True))


def test_A2b_ido_needs_different_requester_ids():
    assert may_pass(Attrs(P, ido=True, rid=1), Attrs(P, rid=0))
    assert not may_pass(Attrs(P, ido=True, rid=0), Attrs(P, rid=0))


def test_A3_posted_must_be_able_to_pass_read():
    assert may_pass(plain[P], plain[R])


def test_A4_posted_must_be_able_to_pass_np_with_data():
    assert may_pass(plain[P], plain[N])


def test_A5_posted_may_pass_completion():
    assert may_pass(plain[P], plain[C])


# -- B: read requests
def test_B2a_read_must_not_pass_posted():
    assert not may_pass(plain[R], plain[P])


def test_B2b_ro_does_not_let_a_read_pass_posted():
    assert not may_pass(Attrs(R, ro=True), plain[P])


def test_B2b_read_with_ido_and_different_ids_may_pass_posted():
    assert may_pass(Attrs(R, ido=True, rid=1), Attrs(P, rid=0))
    assert not may_pass(Attrs(R, ido=True, rid=0), Attrs(P, rid=0))


def test_B3_read_may_pass_read():
    assert may_pass(plain[R], plain[R])


def test_B4_read_may_pass_np_with_data():
    assert may_pass(plain[R], plain[N])


def test_B5_read_may_pass_completion():
    assert may_pass(plain[R], plain[C])


# -- C: non-posted with data (AtomicOp)
def test_C2a_atomicop_must_not_pass_posted():
    assert not may_pass(plain[N], plain[P])


def test_C2b_atomicop_with_ro_may_pass_posted():
    """The DeepEP #661 cell (nccl#2210)."""
    assert may_pass(Attrs(N, ro=True), Attrs(P, ro=True))
    assert passing_rule_name(Attrs(N, ro=True), plain[P]) == "C2b"


def test_C2b_atomicop_with_ido_and_different_ids_may_pass_posted():
    assert may_pass(Attrs(N, ido=True, rid=1), Attrs(P, rid=0))


def test_C3_np_with_data_may_pass_read():
    assert may_pass(plain[N], plain[R])


def test_C4_np_may_pass_np():
    assert may_pass(plain[N], plain[N])


def test_C5_np_may_pass_completion():
    assert may_pass(plain[N], plain[C])


# -- D: completions
def test_D2a_completion_must_not_pass_posted():
    assert not may_pass(plain[C], plain[P])


def test_D2b_completion_with_ro_may_pass_posted():
    assert may_pass(Attrs(C, ro=True), plain[P])
    assert may_pass(Attrs(C, ido=True, rid=1), Attrs(P, rid=0))


def test_D3_completion_must_be_able_to_pass_read():
    assert may_pass(plain[C], plain[R])


def test_D4_completion_must_be_able_to_pass_np_with_data():
    assert may_pass(plain[C], plain[N])


def test_D5a_completions_of_different_transactions_may_pass():
    assert may_pass(Attrs(C, txn=1), Attrs(C, txn=2))


def test_D5b_completions_of_one_transaction_stay_ordered():
    assert not may_pass(Attrs(C, txn=7), Attrs(C, txn=7))


@pytest.mark.parametrize("cell", sorted(RULES, key=lambda k: (k[0], k[1])))
def test_every_cell_cites_a_rule(cell):
    c = RULES[cell]
    assert c.rule[0] in "ABCD" and c.spec and c.why
