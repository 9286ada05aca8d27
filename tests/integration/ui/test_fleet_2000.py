"""The fleet page with 2,000 simulated nodes of 8 GPUs (the fleet simulator on the session broker, a real
coordinator): it draws every node on one canvas, with the totals the API gives, the GPUs that took XID 79 in
red, and no console error. How long it takes is measured by ``tests/benchmarks/bench_ui.py``, not asserted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.localstack.broker import LocalBroker
from tests.support.coordinator.identity import enroll
from tests.support.helpers import wait_until
from tests.support.ui import chrome, console_errors, gpu_colour, login, open_page, shot, text_of
from tests.support.ui_fleet import big_fleet

NODES, GPUS = 2000, 8
BROKEN = ((17, 3), (1234, 0), (1999, 7))  # (node index, GPU) that take XID 79
RED = [0xD6, 0x27, 0x28]


@pytest.mark.kafka
async def test_the_fleet_page_draws_2000_nodes(kafka: LocalBroker, tmp_path: Path) -> None:
    async with big_fleet(kafka.bootstrap, tmp_path, NODES, GPUS) as fleet:
        sim, view = fleet.simulator, fleet.coordinator.get(Fleet)
        broken = [(sim.node_ids[n], gpu) for n, gpu in BROKEN]
        await wait_until(lambda: fleet.coordinator.is_leader, 60, "the coordinator leading")
        keys = sim.public_keys()
        await enroll(fleet.coordinator, {node: keys[node] for node, _ in broken})  # a sick node's samples are signed
        for n, gpu in BROKEN:
            await sim.inject_fault(n, 79, gpu)  # its next samples say the GPU fell off the bus

        def failed() -> bool:
            return all((s := view.node(node)) is not None and s.gpus[gpu].health == "fail" for node, gpu in broken)

        for _ in range(30):  # a round a second, as agents send, until the fleet view has the failed GPUs
            await sim.send_round()
            await asyncio.sleep(1.0)
            if failed():
                break
        assert failed(), [view.node(node) for node, _ in broken]

        def browse() -> None:
            driver = chrome()
            try:
                login(driver, fleet.url, fleet.viewer)
                open_page(driver, fleet.url, "/ui/fleet", timeout=120)
                assert text_of(driver, "#stat-nodes .value") == str(NODES)
                assert text_of(driver, "#stat-gpus .value") == str(NODES * GPUS)
                assert text_of(driver, "#stat-unhealthy .value") == str(len(BROKEN))
                for node, gpu in broken:
                    assert gpu_colour(driver, node, gpu) == RED, node
                for node in (sim.node_ids[0], sim.node_ids[-1]):
                    assert gpu_colour(driver, node, 1) not in (None, [0, 0, 0], RED), node  # drawn, healthy
                assert console_errors(driver) == []
                shot(driver, "fleet-2000")
            finally:
                driver.quit()

        await asyncio.to_thread(browse)
