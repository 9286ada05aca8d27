"""What the registry's tests share: a leading offline coordinator whose writes are recorded, versions with
held-out evaluations, a retraining template, and the replay of recorded state onto another coordinator."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from myolo.common.clock import SimClock
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.core.leadership import LeaderTerm
from myolo.coordinator.registry.component import Registry
from myolo.coordinator.registry.interface import NewVersion
from myolo.coordinator.registry.records import KINDS, STATE_REGISTRY, AliasRecord, ModelRecord, VersionRecord, key_of
from myolo.events.payloads import EvalResult
from tests.support.coordinator.offline import offline_coordinator
from tests.support.coordinator.recorder import recording_producers

HELD_OUT = hashlib.sha256(b"held-out set A").hexdigest()
OTHER_SET = hashlib.sha256(b"held-out set B").hexdigest()
TEMPLATE = """apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {labels: {team: risk}}
spec:
  minReplicas: 1
  maxReplicas: 2
  trainer: {model: {name: tiny}, optimizer: {steps: 100}, data: {globalBatch: 8, evalPath: /data/heldout.bin}}
  checkpointDir: /srv/ckpt
"""
KIND_OF = {cls: kind for kind, cls in KINDS.items()}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def evaluated(loss: float, dataset_sha256: str | None = HELD_OUT) -> EvalResult:
    return EvalResult(
        dataset="/data/heldout.bin", dataset_sha256=dataset_sha256, tokens=4096, loss=loss, perplexity=math.exp(loss)
    )


def new(name: str, loss: float | None = None, **kw: Any) -> NewVersion:
    """A version whose artifact is named ``name`` (its sha256 follows), with a held-out loss when given."""
    if loss is not None:
        kw["eval"] = evaluated(loss)
    return NewVersion(artifact=f"/srv/models/{name}/model.safetensors", sha256=sha(name), **kw)


class Leading:
    """A coordinator leading in epoch 4 (no broker): ``writes`` holds its state writes and sent events in order."""

    def __init__(self, tmp_path: Path, clock: SimClock | None = None, **env: str) -> None:
        self.writes, producers = recording_producers()
        self.clock = clock or SimClock()
        self.coord = offline_coordinator(tmp_path, clock=self.clock, producers=producers, **env)

    async def lead(self) -> Leading:
        await self.coord.assume_term(LeaderTerm(epoch=4, instance_id="me", started=0.0))
        return self

    @property
    def registry(self) -> Registry:
        return self.coord.get(Registry)

    def state(self) -> list[Any]:
        return [record for topic, record in self.writes if topic == STATE_REGISTRY]

    def events(self) -> list[Any]:
        return [data for topic, data in self.writes if topic == "send"]


def replay(records: list[ModelRecord | VersionRecord | AliasRecord], coord: Coordinator) -> None:
    """The records as a follower reads them from the state topic, in log order."""
    for record in records:
        coord.apply_state(STATE_REGISTRY, key_of(record), record, KIND_OF[type(record)])
