"""The daemon's dispatch covers the contract: a handler for every action of ``ACTIONS``, no other."""

from __future__ import annotations

import pytest

from myolo.agent.daemon.actions import daemon_actions
from myolo.events.payloads.commands import ACTION_NAMES
from tests.unit.agent.daemon.test_commands import Node

pytestmark = pytest.mark.usefixtures("stop_nodes")


def test_the_daemon_has_a_handler_for_every_action_of_the_contract(short_dir) -> None:
    node = Node(short_dir)  # trainer and profiler on, as by default
    assert node.rt.trainer is not None and node.rt.profiler is not None
    handlers = daemon_actions(node.rt)
    missing = [a for a in ACTION_NAMES if a not in handlers]
    assert missing == [], f"the agent has no handler for {missing}: add one to daemon_actions"
    assert sorted(handlers) == sorted(ACTION_NAMES)
    node.rt.commands.ledger.close()


def test_without_a_trainer_the_trainers_actions_are_left_out(short_dir) -> None:
    node = Node(short_dir, toml="[trainer]\nenabled = false\n")
    handlers = set(daemon_actions(node.rt))
    assert set(ACTION_NAMES) - handlers == {"start_workers", "stop_workers", "profile"}
    node.rt.commands.ledger.close()
