"""The composition root: the coordinator daemon's components, in the order they are built and handed each event.

Chosen once, here, and passed to everything that assembles a coordinator or reads its declarations (the
daemon, its config, state codec and topics, backup and restore, the local stack); nothing in ``core/`` or
``config.py`` imports this module. A component requires interfaces provided by components listed before it
(checked at assembly). Adding one is adding its folder and one line here.
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
from coordinator.quantize.component import Quantize
from coordinator.registry.component import Registry
from coordinator.rollouts.component import Rollouts
from coordinator.ui.component import Ui

COMPONENTS: tuple[type[Component], ...] = (
    Commands, Fleet, Cordons, Jobs, Nodes, Registry, Drift, Rollouts, Preflight, Quantize, Ui,
)  # fmt: skip
