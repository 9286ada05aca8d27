"""What signatures cost, on one core, all in one run.

- Coordinator, ingest: NodeFault events per second through decode + the ingest guard (the nodes component's
  check: the node's enrolled Ed25519 key, its agent's source), next to decode alone (how an unsigned fault
  was accepted before), and a NodeSample through decode + guard (telemetry: not guarded, a dict miss).
- Agent: signing a fault (envelope, Ed25519 signature, encode) next to encoding it unsigned.
- Coordinator, state: decode + HMAC-SHA256 verification of a state record (a cordon) with a key derived from
  the coordinators' key (``myolo.common.keys.derive_hmac``), next to decode alone.

Rates are per second of this process's CPU time (best of 5), so other load on the machine does not count.
``--nodes`` enrolled keys, faults spread over all of them; results/signing.json.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any, cast

from myolo.common.keys import Ed25519Signer, HmacKey, derive_hmac
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.cordons.policy import AUTO_FAULT, record
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.coordinator import state_codec
from myolo.coordinator.core.ingest_guard import IngestGuard
from myolo.coordinator.nodes.component import Nodes
from myolo.coordinator.nodes.records import KIND, STATE_NODE_KEYS, NodeKeyRecord
from myolo.events.codec import decode, encode
from myolo.events.envelope import new_event
from myolo.events.examples import node_sample
from myolo.events.payloads import NodeFault
from myolo.events.signing import SIGNED_NODE_EVENTS, sign, verify_with
from myolo.events.sources import agent_source
from tests.benchmarks.common import write_result


def _rate(fn: Callable[[], object], n: int) -> float:
    """Calls per second of this process's CPU time (best of 5)."""
    fn()
    best = 0.0
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        best = max(best, n / max(time.process_time() - t0, 1e-9))
    return best


def _fault(node: str) -> NodeFault:
    return NodeFault(node_id=node, kind="xid", health="fail", xid=79, gpu_index=3, reasons=["XID 79 on GPU 3"])


def _guard(keys: dict[str, Ed25519Signer]) -> tuple[Nodes, IngestGuard]:
    """The nodes component as every coordinator has it after reading myolo.state.node-keys (no broker)."""
    nodes = Nodes(cast(Context, None))  # the check reads only the keys it was given through on_state
    for n, (node, key) in enumerate(keys.items()):
        rec = NodeKeyRecord(node_id=node, public_key=key.public.pem(), key_id=key.key_id, enrolled_at=n, by="bench")
        nodes.on_state(STATE_NODE_KEYS, node, rec, KIND)
    return nodes, IngestGuard([nodes], SIGNED_NODE_EVENTS)


def _cycle(records: list[Any]) -> Callable[[], Any]:
    """One record after another, round and round (so lookups spread over every node's key)."""
    state = {"i": 0}

    def next_record() -> Any:
        i = state["i"]
        state["i"] = (i + 1) % len(records)
        return records[i]

    return next_record


def measure(nodes: int = 1000, n: int = 5000) -> dict[str, Any]:
    keys = {f"node-{i:04d}": Ed25519Signer.generate() for i in range(nodes)}
    component, guard = _guard(keys)
    signed = [encode(sign(new_event(_fault(node), agent_source(node)), key)) for node, key in keys.items()]
    unsigned = [encode(new_event(_fault(node), agent_source(node))) for node in keys]
    sample = encode(new_event(node_sample("node-0000", gpus=8), agent_source("node-0000")))
    next_signed, next_unsigned = _cycle(signed), _cycle(unsigned)

    def decode_only() -> None:
        key, value, headers = next_unsigned()
        decode(value, headers, key)

    def decode_and_verify() -> None:
        key, value, headers = next_signed()
        guard.verify(decode(value, headers, key))

    def sample_through_guard() -> None:
        guard.verify(decode(sample[1], sample[2], sample[0]))

    secret = HmacKey.of(b"per-node secret, for comparison")
    hmac_signed = _cycle([encode(sign(new_event(_fault(node), agent_source(node)), secret)) for node in keys])

    def decode_and_hmac_verify() -> None:
        key, value, headers = hmac_signed()
        verify_with(decode(value, headers, key), secret)

    message, priv = b"m" * 300, next(iter(keys.values()))
    raw_sig = bytes.fromhex(priv.sign_bytes(message))
    refused_before = component.refused
    ingest = {
        "unsigned_fault_decode_per_s": round(_rate(decode_only, n)),
        "signed_fault_decode_verify_per_s": round(_rate(decode_and_verify, n)),
        "sample_8gpu_decode_guard_per_s": round(_rate(sample_through_guard, n)),
        "sample_8gpu_decode_per_s": round(_rate(lambda: decode(sample[1], sample[2], sample[0]), n)),
        # where the time goes, and what the scheme we did not choose would cost (see signing.md)
        "ed25519_verify_alone_per_s": round(_rate(lambda: priv.public.key.verify(raw_sig, message), n)),
        "hmac_fault_decode_verify_per_s": round(_rate(decode_and_hmac_verify, n)),
    }
    assert component.refused == refused_before and component.verified > 0, "every signed fault must verify"
    ingest["verify_cost_us"] = round(
        1e6 / ingest["signed_fault_decode_verify_per_s"] - 1e6 / ingest["unsigned_fault_decode_per_s"], 1
    )
    ingest["signed_over_unsigned"] = round(
        ingest["signed_fault_decode_verify_per_s"] / ingest["unsigned_fault_decode_per_s"], 3
    )

    node, key = next(iter(keys.items()))
    agent = {
        "fault_encode_per_s": round(_rate(lambda: encode(new_event(_fault(node), agent_source(node))), n)),
        "fault_sign_encode_per_s": round(
            _rate(lambda: encode(sign(new_event(_fault(node), agent_source(node)), key)), n)
        ),
    }

    codec = state_codec(COMPONENTS)
    hmac = derive_hmac(Ed25519Signer.generate(), "state")
    cordon = record("node-0001", True, "FAIL xid 79 on GPU 3: XID 79", AUTO_FAULT, 1_700_000_000.0, 7, None)
    value, headers = codec.encode(cordon)
    mac = hmac.sign_bytes(value)

    def state_verify() -> None:
        if not hmac.verify_bytes(value, mac):
            raise AssertionError("the state record must verify")
        codec.decode(value, headers)

    state = {
        "record_bytes": len(value),
        "state_decode_per_s": round(_rate(lambda: codec.decode(value, headers), n * 4)),
        "state_hmac_verify_decode_per_s": round(_rate(state_verify, n * 4)),
    }
    return {
        "enrolled_nodes": nodes,
        "fault_bytes": len(signed[0][1]),
        "signature_headers_bytes": sum(len(k) + len(v) for k, v in signed[0][2])
        - sum(len(k) + len(v) for k, v in unsigned[0][2]),
        "ingest": ingest,
        "agent": agent,
        "state": state,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=1000, help="enrolled node keys (faults spread over all of them)")
    p.add_argument("-n", type=int, default=5000, help="calls per timed round (5 rounds, best kept)")
    args = p.parse_args()
    write_result("signing", measure(args.nodes, args.n))


if __name__ == "__main__":
    main()
