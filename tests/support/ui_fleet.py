"""A coordinator (every component, its API on an ephemeral port) fed by the fleet simulator: thousands of
simulated nodes for the dashboard's 2,000-node test and benchmark. Selenium blocks, so the browser runs in a
thread (``asyncio.to_thread``) while this event loop keeps the coordinator serving."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from myolo.agent.fleetsim.simulator import FleetSimulator
from myolo.coordinator.api import tokens
from myolo.coordinator.api.config import ApiConfig
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.config import default_config
from myolo.coordinator.core.config import LeaderConfig, SigningConfig
from myolo.coordinator.core.coordinator import Coordinator, topic_specs
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.fleet.config import FleetConfig
from myolo.events.settings import KafkaSettings
from myolo.events.topics import ensure_topics
from tests.support.helpers import new_ed25519_key, wait_until


@dataclass
class BigFleet:
    coordinator: Coordinator
    simulator: FleetSimulator
    url: str
    viewer: str  # a viewer's token


@asynccontextmanager
async def big_fleet(bootstrap: str, tmp: Path, nodes: int, gpus: int = 8, rounds: int = 2) -> AsyncIterator[BigFleet]:
    """``rounds`` samples from every one of ``nodes`` simulated nodes, all in the coordinator's view."""
    settings = KafkaSettings(bootstrap=bootstrap, client_id="ui-fleet")
    await ensure_topics(settings.client_kwargs(), topic_specs(COMPONENTS))
    key = tmp / "coordinator.key"
    new_ed25519_key(key)
    tokens_file = tmp / "api-tokens"
    viewer = tokens.add(tokens_file, "vic", "viewer")
    run = uuid.uuid4().hex[:6]
    cfg = default_config(
        COMPONENTS,
        instance_id=f"ui-{run}",
        leader=LeaderConfig(group_id=f"lead-ui-{run}"),
        fleet=FleetConfig(lost_after_s=3600.0, suspect_after_intervals=1000, request_sample_on_suspect=False),
        api=ApiConfig(port=0, tokens_file=str(tokens_file)),
        signing=SigningConfig(key_file=str(key)),
        kafka=settings,
    )
    service = Coordinator(cfg, COMPONENTS)
    runner = asyncio.create_task(service.run())
    sim = FleetSimulator(settings, nodes, gpus, 1.0, 0.0, seed=5, run_id=run)
    try:
        await asyncio.wait_for(service.started.wait(), 120)
        await sim.start()
        fleet = service.get(Fleet)
        sent = 0
        while len(fleet.view.nodes_by_id) < nodes or sent < rounds:  # the first rounds may beat the consumer
            assert sent < rounds + 60, f"{len(fleet.view.nodes_by_id)} of {nodes} nodes in the fleet view"
            await sim.send_round()
            sent += 1
            await asyncio.sleep(1.0)  # a round a second, as the agents send
        await wait_until(lambda: len(fleet.view.nodes_by_id) >= nodes, 60, f"{nodes} nodes in the fleet view")
        yield BigFleet(service, sim, service.api_url, viewer)
    finally:
        await sim.stop()
        service.request_stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(runner, 60)
