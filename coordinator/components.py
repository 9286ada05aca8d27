"""The composition root: the coordinator daemon's components, in the order they are built and handed each event.

Chosen once, here, and passed to everything that assembles a coordinator or reads its declarations (the
daemon, its config, state codec and topics, backup and restore, the local stack); nothing in ``core/`` or
``config.py`` imports this module. A component requires interfaces provided by components listed before it
(checked at assembly). Adding one is adding its folder and one line here.
"""

from __future__ import annotations

from myolo.coordinator.commands.component import Commands
from myolo.coordinator.cordons.component import Cordons
from myolo.coordinator.core.component import Component
from myolo.coordinator.drift.component import Drift
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.jobs.component import Jobs
from myolo.coordinator.nodes.component import Nodes
from myolo.coordinator.preflight.component import Preflight
from myolo.coordinator.quantize.component import Quantize
from myolo.coordinator.registry.component import Registry
from myolo.coordinator.rollouts.component import Rollouts
from myolo.coordinator.ui.component import Ui

COMPONENTS: tuple[type[Component], ...] = (
    Commands, Fleet, Cordons, Jobs, Nodes, Registry, Drift, Rollouts, Preflight, Quantize, Ui,
)  # fmt: skip
