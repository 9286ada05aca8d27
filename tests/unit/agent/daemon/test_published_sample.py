"""The daemon publishes each sample in its compact form; the agent itself keeps every link's reading."""

from __future__ import annotations

import asyncio

from myolo.agent.daemon.main import serve
from myolo.agent.metrics.sources import SOURCES
from myolo.common.clock import SimClock
from tests.unit.agent.daemon.test_main import FakeBroker, make_runtime, play, settle


async def test_published_samples_summarise_nvlink_and_local_readers_keep_every_link(short_dir):
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock)
    task = asyncio.create_task(serve(rt, install_signals=False))
    await settle()
    await play(clock, 3, 0.5)
    published, local = broker.samples()[-1], rt.sampler.last_sample
    assert local is not None and published.seq <= local.seq
    for g in published.gpus:
        assert g.nvlink is None  # every simulated link is up and clean: nothing to list
        assert (g.nvlink_links, g.nvlink_active, g.nvlink_replay_errors, g.nvlink_crc_data_errors) == (18, 18, 0, 0)
    for g in local.gpus:
        assert g.nvlink is not None and len(g.nvlink) == 18 and g.nvlink_links is None
    # the metrics read the same from either form
    errors = SOURCES["gpu.nvlink_replay_errors"].gpu
    assert errors is not None
    assert [list(errors(g, None)) for g in published.gpus] == [list(errors(g, None)) for g in local.gpus]
    assert [g.nvlink_up for g in published.gpus] == [g.nvlink_up for g in local.gpus] == [(18, 18)] * 4
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 10) == 0
