"""The node's identity: an Ed25519 key that signs the node events which make the coordinator act.

Faults, command acks and training faults and completions are signed by the agent when it makes them, before
they are spooled, so an event sent after an outage still verifies; the coordinator checks them against the
node's enrolled public key (``<data_dir>/node.key.pub``, ``myolo-agent key show``). Telemetry stays unsigned.
"""

from myolo.agent.identity.key import IdentityConfig, node_key

__all__ = ["IdentityConfig", "node_key"]
