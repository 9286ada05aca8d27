"""Commands to agents: intents in the state topic, signed commands keyed by node, acks, retries."""

from coordinator.commands.dispatcher import Dispatcher, NotLeading, check_args

__all__ = ["Dispatcher", "NotLeading", "check_args"]
