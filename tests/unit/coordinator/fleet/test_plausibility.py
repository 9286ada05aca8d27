"""The sample check's quick pass finds exactly what the field-naming walk finds, and names the same field."""

from __future__ import annotations

import random

import msgspec
import pytest

from myolo.coordinator.fleet.plausibility import _first_problem, check_sample
from myolo.events.examples import node_sample

BREAKS = (
    ("mem_used_bytes", lambda g: g.mem_total_bytes + 1),
    ("temp_gpu_c", lambda g: 151.0),
    ("temp_mem_c", lambda g: -41.0),
    ("power_w", lambda g: 5001.0),
    ("clock_sm_mhz", lambda g: 10_001),
    ("clock_mem_mhz", lambda g: 10_001),
    ("index", lambda g: 0),
)


def test_a_sound_sample_passes() -> None:
    assert check_sample(node_sample(gpus=8)) is None


@pytest.mark.parametrize("field,value", BREAKS, ids=[b[0] for b in BREAKS])
def test_each_break_is_found_and_named(field: str, value) -> None:
    s = node_sample(gpus=8)
    gpus = list(s.gpus)
    gpus[3] = msgspec.structs.replace(gpus[3], **{field: value(gpus[3])})
    broken = msgspec.structs.replace(s, gpus=gpus)
    assert check_sample(broken) == _first_problem(broken)
    assert f"gpus[3].{field}" in (check_sample(broken) or "")


def test_random_breaks_agree_with_the_walk() -> None:
    rng = random.Random(5)
    base = node_sample(gpus=8)
    for _ in range(300):
        gpus = list(base.gpus)
        for _ in range(rng.randint(0, 3)):
            i = rng.randrange(8)
            field, value = rng.choice(BREAKS)
            gpus[i] = msgspec.structs.replace(gpus[i], **{field: value(gpus[i])})
        s = msgspec.structs.replace(base, gpus=gpus, interval_s=rng.choice((1.0, 1.0, 0.0, 4000.0)))
        assert check_sample(s) == _first_problem(s)
