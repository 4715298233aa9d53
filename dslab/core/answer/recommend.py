"""The answer for a dataset's shape asked with keywords: the tests', benchmarks' and scripts' way in to the same
``answer.answer`` every command views (it builds the ``Question`` and nothing else)."""

from __future__ import annotations

from typing import Any, Sequence

from ..facts.compute import accelerators_of
from ..facts.limits import DEFAULT_INSTANCE, RUNTIME_FIELDS, RUNTIME_FIX
from ..facts.prices import PriceTable
from ..model.provisioning import Provisioning, as_deployed
from ..shape import DatasetShape
from .answer import ALL_SOURCES, Answer, Question, answer
from .premise import Premise
from .sizing import AU_TARGET


def question_for(shape: DatasetShape, *, rate: float, prices: PriceTable, instance_type: str = DEFAULT_INSTANCE,
                 instance_count: int = 1, epochs: int = 1, accelerators: int | None = None,
                 volume_size_gb: int | None = None, readers: int | None = None, lab: Provisioning | None = None,
                 fsx_capacity_gib: int = 1200, au_target: float = AU_TARGET,
                 sources: Sequence[tuple[str, str]] = ALL_SOURCES, random_access: bool = False,
                 data_in_efs: bool = False, portable: bool = False,
                 too_long: tuple[str, str] = (RUNTIME_FIELDS, RUNTIME_FIX), origin: str = "given",
                 compute: str = "given") -> Question:
    """The ``Question`` these keywords ask (``lab``: the lab as deployed, default the stacks' lab with FSx at
    ``fsx_capacity_gib``)."""
    premise = Premise(instance_type=instance_type, instance_count=instance_count,
                      accelerators=accelerators or accelerators_of(instance_type), epochs=epochs, rate=rate,
                      compute=compute, shape=shape, shape_origin=origin, lab=lab or as_deployed(fsx_capacity_gib),
                      volume_size_gb=volume_size_gb, readers=readers, au_target=au_target)
    return Question(premise, prices, tuple(sources), random_access=random_access, data_in_efs=data_in_efs,
                    portable=portable, runtime_field=too_long[0], runtime_fix=too_long[1])


def recommend(shape: DatasetShape, **kwargs: Any) -> Answer:
    """``answer(question_for(shape, **kwargs))``."""
    return answer(question_for(shape, **kwargs))


__all__ = ["question_for", "recommend"]
