"""The coordinator's components, in the order they are built and handed each event.

A component may depend on those listed before it (through their interfaces). Adding one is adding its
folder and one line here.
"""

from __future__ import annotations

from coordinator.commands.component import Commands
from coordinator.cordons.component import Cordons
from coordinator.core.component import Component
from coordinator.drift.component import Drift
from coordinator.fleet.component import Fleet
from coordinator.jobs.component import Jobs
from coordinator.nodes.component import Nodes
from coordinator.preflight.component import Preflight
from coordinator.registry.component import Registry
from coordinator.rollouts.component import Rollouts

COMPONENTS: tuple[type[Component], ...] = (Commands, Fleet, Cordons, Jobs, Nodes, Registry, Drift, Rollouts, Preflight)
