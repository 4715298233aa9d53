"""The answers a process keeps (dslab/core/answer/answer.py ``answer``): a question asked again is answered from
memory (`export` reads one answer several times, the packing advice asks the packed shape's), by its every part and
its prices; the 128 asked last are kept, the oldest forgotten first; a question that cannot be kept (a premise holding
a list) is still answered (issue 58: the memo's key and its eviction were untested)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import pytest

from dslab.core.answer import answer as answer_module
from dslab.core.answer.recommend import question_for
from dslab.core.facts.prices import PriceTable
from dslab.core.shape import DatasetShape

SHAPE = DatasetShape(30_607, 1_100_000_000)


@pytest.fixture
def fresh_memo(monkeypatch):
    """An empty memo, and ``_answer`` counting the questions it computes (each answered with a new object)."""
    computed: list = []

    def compute(question):
        computed.append(question)
        return object()
    monkeypatch.setattr(answer_module, "_ANSWERS", OrderedDict())
    monkeypatch.setattr(answer_module, "_answer", compute)
    return computed


def _question(epochs: int = 1, prices: PriceTable | None = None):
    return question_for(SHAPE, rate=300.0, prices=prices or PriceTable(), epochs=epochs)


def test_a_question_asked_again_is_answered_from_memory_and_another_is_computed(fresh_memo):
    first = answer_module.answer(_question())
    assert answer_module.answer(_question()) is first and len(fresh_memo) == 1
    assert answer_module.answer(_question(epochs=2)) is not first and len(fresh_memo) == 2


def test_the_same_question_at_other_prices_is_computed_again(fresh_memo):
    cheap = answer_module.answer(_question())
    dearer = PriceTable({**PriceTable().data, "s3_get_per_million": 0.50})
    assert answer_module.answer(_question(prices=dearer)) is not cheap and len(fresh_memo) == 2
    assert answer_module.answer(_question(prices=PriceTable())) is cheap


def test_the_128_asked_last_are_kept_and_the_oldest_forgotten_first(fresh_memo):
    answers = [answer_module.answer(_question(epochs=n)) for n in range(1, 129)]
    # 128 kept: the first is still answered from memory, and asking it makes it the newest.
    assert answer_module.answer(_question(epochs=1)) is answers[0] and len(fresh_memo) == 128
    # A 129th pushes out the oldest asked, now epochs=2; epochs=1 and the 129th stay.
    newest = answer_module.answer(_question(epochs=129))
    assert answer_module.answer(_question(epochs=1)) is answers[0]
    assert answer_module.answer(_question(epochs=129)) is newest and len(fresh_memo) == 129
    assert answer_module.answer(_question(epochs=2)) is not answers[1] and len(fresh_memo) == 130


def test_a_question_that_cannot_be_kept_is_answered_each_time():
    # A premise holding a list cannot be hashed: the answer is computed, every time, and is a whole answer.
    question = _question()
    unhashable = replace(question, premise=replace(question.premise, notes=["a list"]))
    once, again = answer_module.answer(unhashable), answer_module.answer(unhashable)
    assert once is not again and once.pick.source == again.pick.source
