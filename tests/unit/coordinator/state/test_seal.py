"""State records carry the coordinators' seal: the tail applies only what a key of ours sealed, for exactly the
topic, key, kind and value it was sealed for; anything else is skipped, counted as forged and logged, never
applied. Records sealed with a key rotated out are still applied and handed to the leader to seal again."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from myolo.common.errors import ConfigError
from myolo.common.keys import Ed25519Signer, HmacKey, derive_hmac, load_signer
from myolo.coordinator.commands.records import CommandIntent
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.config import load_coordinator_config
from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.core.config import previous_signers
from myolo.coordinator.core.leadership import LeaderTerm
from myolo.coordinator.state import ForgedStateRecord, StateCodec, StateKeys, StateStore, StateTail
from myolo.coordinator.state.codec import KIND_HEADER
from myolo.coordinator.state.seal import PURPOSE, SEAL_HEADER
from myolo.events.settings import KafkaSettings
from tests.support.helpers import new_ed25519_key, write_key

CODEC = StateCodec({"cordon": CordonRecord, "command": CommandIntent, "term": LeaderTerm})
SIGNER = Ed25519Signer.generate()
KEYS = StateKeys.derive(SIGNER)
TERM = LeaderTerm(epoch=7, instance_id="c1", started=1.0)


def sealed(topic: str, key: bytes, record=None, kind: str = "term", keys: StateKeys = KEYS):
    value = None if record is None else CODEC.encode(record)[0]
    return value, [(KIND_HEADER, kind.encode()), keys.seal(topic, key, kind, value)]


def test_a_seal_verifies_for_exactly_what_it_sealed() -> None:
    value, headers = sealed("t", b"k", TERM)
    assert KEYS.check("t", b"k", "term", value, headers) is True
    assert KEYS.current.key_id == derive_hmac(SIGNER, PURPOSE).key_id  # what every coordinator derives
    for changed in (
        ("u", b"k", "term", value),  # another topic
        ("t", b"j", "term", value),  # another key
        ("t", b"k", "cordon", value),  # relabelled
        ("t", b"k", "term", value.replace(b"7", b"9")),  # edited
        ("t", b"k", "term", None),  # turned into a tombstone
    ):
        with pytest.raises(ForgedStateRecord, match="seal does not match"):
            KEYS.check(*changed, headers)
    _, tomb = sealed("t", b"k", None)
    with pytest.raises(ForgedStateRecord, match="seal does not match"):
        KEYS.check("t", b"k", "term", b"", tomb)  # a tombstone's seal is not an empty value's


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ([(KIND_HEADER, b"term")], "not sealed"),
        ([(SEAL_HEADER, b"")], "not one of ours"),
        ([(SEAL_HEADER, b"someone:" + b"0" * 64)], "key id 'someone', not one of ours"),
        ([(SEAL_HEADER, "x:é".encode())], "not hex"),
        ([(SEAL_HEADER, b"a:b"), (SEAL_HEADER, b"c:d")], "2 myolo-state-sig headers"),
    ],
)
def test_a_record_without_our_seal_is_forged(headers, reason: str) -> None:
    with pytest.raises(ForgedStateRecord, match=reason):
        KEYS.check("t", b"k", "term", b"{}", headers)


def test_an_outsiders_seal_fails_even_under_our_key_id() -> None:
    """A writer without the coordinators' private key (an agent holds only the public half) cannot make one."""
    value = CODEC.encode(TERM)[0]
    guess = HmacKey(KEYS.current.key_id, SIGNER.public.pem().encode())
    with pytest.raises(ForgedStateRecord, match="does not match"):
        KEYS.check("t", b"k", "term", value, sealed("t", b"k", TERM, keys=StateKeys(guess))[1])
    other = StateKeys.derive(Ed25519Signer.generate())
    with pytest.raises(ForgedStateRecord, match="not one of ours"):
        KEYS.check("t", b"k", "term", value, sealed("t", b"k", TERM, keys=other)[1])


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    async def send_raw(self, topic, value, key, headers) -> None:
        self.sent.append((topic, value, key, headers))


def tail(keys: StateKeys = KEYS) -> tuple[StateTail, list]:
    applied: list = []
    t = StateTail(KafkaSettings(bootstrap="127.0.0.1:1"), ["t"], CODEC, lambda *a: applied.append(a), keys)
    return t, applied


def test_the_tail_applies_sealed_records_and_skips_forged_ones_loudly() -> None:
    t, applied = tail()
    t._one("t", b"term", *sealed("t", b"term", TERM))
    cordon = CordonRecord(node_id="n1", cordoned=True, reason="XID 79", by="auto:fault", time=1.0, epoch=7)
    t._one("t", b"n1", *sealed("t", b"n1", cordon, "cordon"))
    assert applied == [("t", "term", TERM, "term"), ("t", "n1", cordon, "cordon")]
    higher = LeaderTerm(epoch=99, instance_id="attacker", started=2.0)
    intent = CommandIntent(command_id="x", node_id="n1", action="drain", epoch=99, created=0.0)
    with capture_logs() as logs:
        t._one("t", b"term", CODEC.encode(higher)[0], [(KIND_HEADER, b"term")])  # unsealed
        t._one("t", b"x", CODEC.encode(intent)[0], sealed("t", b"x", TERM)[1])  # a seal for another value
        t._one("t", b"n1", None, [(KIND_HEADER, b"cordon")])  # a tombstone lifting the cordon
    assert len(applied) == 2 and (t.forged, t.skipped, t.applied) == (3, 0, 2)
    assert [(e["event"], e["topic"], e["key"], e["log_level"]) for e in logs] == [
        ("forged state record skipped", "t", b"term", "error"),
        ("forged state record skipped", "t", b"x", "error"),
        ("forged state record skipped", "t", b"n1", "error"),
    ]
    assert "not sealed" in logs[0]["reason"] and "does not match" in logs[1]["reason"]


async def test_the_store_seals_puts_and_tombstones_and_a_rotation_is_sealed_again() -> None:
    old = Ed25519Signer.generate()
    rotated = StateKeys.derive(SIGNER, [old])
    producer = Recorder()
    store = StateStore(producer, CODEC, rotated)  # type: ignore[arg-type]
    await store.put("t", "term", TERM)
    await store.delete("t", "n1", "cordon")
    t, applied = tail(rotated)
    for topic, value, key, headers in producer.sent:
        t._one(topic, key, value, headers)
    assert [a[1:3] for a in applied] == [("term", TERM), ("n1", None)] and t.stale() == {}
    # records sealed before the rotation: applied, and remembered until sealed again with the current key
    t._one("t", b"n2", *sealed("t", b"n2", None, "cordon", keys=StateKeys.derive(old)))
    t._one("t", b"term", *sealed("t", b"term", TERM, keys=StateKeys.derive(old)))
    assert t.forged == 0 and set(t.stale()) == {("t", b"n2"), ("t", b"term")}
    producer.sent.clear()
    await store.reseal(t.stale())
    for topic, value, key, headers in producer.sent:
        t._one(topic, key, value, headers)
    assert t.stale() == {} and len(producer.sent) == 2
    # a coordinator that no longer lists the old key treats what it sealed as forged
    t2, _ = tail(StateKeys.derive(SIGNER))
    t2._one("t", b"n2", *sealed("t", b"n2", None, "cordon", keys=StateKeys.derive(old)))
    assert t2.forged == 1


def test_previous_keys_come_from_the_config_and_follow_the_file_rule(tmp_path) -> None:
    current, old = new_ed25519_key(tmp_path / "c.key"), write_key(tmp_path / "old.key")
    env = {
        "MYOLO_SIGNING_KEY_FILE": str(tmp_path / "c.key"),
        "MYOLO_SIGNING_PREVIOUS_KEY_FILES": f'["{old}"]',
        "MYOLO_API_ENABLED": "false",
    }
    cfg = load_coordinator_config(None, components=COMPONENTS, env=env)
    keys = StateKeys.derive(current, previous_signers(cfg.signing))
    assert keys.previous == (derive_hmac(load_signer(old), PURPOSE),)
    old.chmod(0o644)
    with pytest.raises(ConfigError, match=r"signing\.previous_key_files\[0\]: .*chmod 600"):
        load_coordinator_config(None, components=COMPONENTS, env=env)
