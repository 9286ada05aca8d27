"""``myoloctl backup`` then ``restore`` between two real brokers, with real coordinators on each side.

A coordinator on the first cluster applies a job and registers a model (champion alias set); ``myoloctl backup``
takes its state topics, a config and the job's checkpoint manifest; ``myoloctl restore`` writes them into a
second, empty cluster. The restored topics hold exactly the newest record of each key of the first (value and
headers byte for byte), and a coordinator started there with the same signing key sees the same job and registry
with no record refused as forged, in the next epoch. A second restore into the now non-empty cluster is refused
and writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from myolo.common.clock import SimClock
from myolo.coordinator.backup.state_read import existing_topics
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.coordinator import topic_specs
from myolo.coordinator.core.leadership import STATE_COORDINATOR
from myolo.coordinator.jobs.interface import JobsAPI
from myolo.coordinator.jobs.records import STATE_JOBS
from myolo.coordinator.localstack.broker import LocalBroker
from myolo.coordinator.registry.interface import ModelRegistry, NewVersion
from myolo.coordinator.registry.records import STATE_REGISTRY
from myolo.coordinator.rollouts.records import STATE_ROLLOUTS
from myolo.events.settings import KafkaSettings
from myolo.events.topics import ensure_topics
from tests.integration.coordinator.conftest import Services, cluster_config, one_leader
from tests.support.helpers import read_topic

ROOT = Path(__file__).resolve().parents[3]
BY_NAME = {t.name: t for t in topic_specs(COMPONENTS)}
JOB = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: restore-me}}
spec:
  minReplicas: 1
  maxReplicas: {hi}
  replica: {{tp: 1, pp: 1}}
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: 10}}}}
  checkpointDir: {ckpt}
"""
SHA = "ab" * 32


async def myoloctl(tmp_path: Path, *args: str) -> tuple[int, str]:
    """The real CLI in its own process (no local stack, no MYOLO_* from this shell)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYOLO_")}
    env["MYOLO_STATE_DIR"] = str(tmp_path / "no-stack")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "myolo.coordinator.cli.main", *args,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def shape(settings: KafkaSettings, topic: str) -> tuple[int, str]:
    """(partitions, cleanup.policy) of a topic, as the broker says."""
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        (answer,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        entries = answer.to_object()["resources"][0]["config_entries"]
        policy = next(e["config_value"] for e in entries if e["config_names"] == "cleanup.policy")
        return len(described["partitions"]), policy
    finally:
        await admin.close()


def newest_per_key(records) -> list[tuple]:
    latest = {}
    for r in records:
        latest[(r.partition, r.key)] = (r.partition, r.key, r.value, list(r.headers))
    return sorted(latest.values(), key=lambda t: (t[0], t[1]))


@pytest.mark.kafka
async def test_backup_then_restore_into_an_empty_cluster_keeps_the_state_and_its_seals(
    tmp_path: Path, brokers: tuple[LocalBroker, LocalBroker], key_file: Path
) -> None:
    src_broker, dst_broker = brokers
    src = KafkaSettings(bootstrap=src_broker.bootstrap, client_id="test")
    dst = KafkaSettings(bootstrap=dst_broker.bootstrap, client_id="test")
    await ensure_topics(src.client_kwargs(), topic_specs(COMPONENTS))
    ckpt = tmp_path / "ckpt"
    (ckpt / "step-00000010").mkdir(parents=True)
    (ckpt / "step-00000010" / ".metadata").write_bytes(b"dcp metadata")
    (ckpt / "latest.json").write_text('{"step": 10}')
    conf = tmp_path / "etc" / "coordinator.toml"
    conf.parent.mkdir()
    conf.write_text(f'instance_id = "c1"\n[kafka]\nbootstrap = "{src.bootstrap}"\nsasl_password = "hunter2"\n')

    services, clock = Services(), SimClock()
    try:
        first = await services.start(cluster_config(src.bootstrap, key_file, "first"), clock)
        await one_leader(first)
        jobs, registry = first.get(JobsAPI), first.get(ModelRegistry)
        await jobs.apply(JOB.format(hi=2, ckpt=ckpt), by="test")
        await jobs.apply(JOB.format(hi=3, ckpt=ckpt), by="test")  # an update: the old record is superseded
        await registry.register("m", NewVersion(artifact="/models/m-1.safetensors", sha256=SHA), by="test")
        await registry.set_alias("m", "champion", 1, by="test", reason="first model")
        epoch = first.epoch
        await services.stop(first)
        want_job = jobs.job("restore-me")
        want_registry = (registry.models(), registry.versions("m"), registry.aliases("m"))
        assert want_job is not None and want_job.spec.job.max_replicas == 3 and epoch is not None

        admin = AIOKafkaAdminClient(**src.client_kwargs())  # a topic the cluster lacks: skipped, and not made
        await admin.start()
        await admin.delete_topics([STATE_ROLLOUTS])
        await admin.close()
        archive = tmp_path / "backup.tar.gz"
        code, out = await myoloctl(
            tmp_path, "backup", "--output", str(archive), "--bootstrap", src.bootstrap, "--config", str(conf)
        )
        assert code == 0, out
        assert f"wrote {archive}" in out and "(redacted: sasl_password)" in out
        assert f"topic {STATE_ROLLOUTS} does not exist on the cluster: skipped" in out
        assert STATE_ROLLOUTS not in await existing_topics(src)
        with tarfile.open(archive) as tar:
            names = tar.getnames()
            manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
            config_text = tar.extractfile("configs/coordinator.toml").read()  # type: ignore[union-attr]
        assert names[0] == "manifest.json" and b"hunter2" not in config_text
        assert (
            "checkpoints/restore-me/latest.json" in names and "checkpoints/restore-me/step-00000010/.metadata" in names
        )
        topics = {t["name"]: t for t in manifest["topics"]}
        assert topics[STATE_JOBS]["read"] > topics[STATE_JOBS]["records"] == 1  # older values of the job dropped
        assert manifest["kept"] == "latest-per-key" and manifest["checkpoints"][0]["missing"] == []
        assert manifest["absent_topics"] == [STATE_ROLLOUTS]

        code, out = await myoloctl(tmp_path, "restore", str(archive), "--dry-run", "--key-file", str(key_file))
        assert code == 0 and "nothing written" in out and "seals: all" in out, out
        restored_files = tmp_path / "restored"
        code, out = await myoloctl(
            tmp_path, "restore", str(archive), "--bootstrap", dst.bootstrap, "--restore-configs", str(restored_files)
        )
        assert code == 0, out
        assert (restored_files / "configs" / "coordinator.toml").read_bytes() == config_text
        assert (restored_files / "checkpoints" / "restore-me" / "latest.json").read_text() == '{"step": 10}'

        for topic in (STATE_JOBS, STATE_REGISTRY, STATE_COORDINATOR):  # byte for byte, to the same partitions
            assert newest_per_key(await read_topic(dst, topic)) == newest_per_key(await read_topic(src, topic)), topic
        for topic in manifest["topics"]:  # created as the catalogue says (not by a broker's auto-creation)
            assert await shape(dst, topic["name"]) == (BY_NAME[topic["name"]].partitions, "compact")

        again = await services.start(cluster_config(dst.bootstrap, key_file, "restored"), clock)
        assert again.tail.forged == 0 and again.tail.skipped == 0 and again.tail.applied > 0
        got = again.get(JobsAPI).job("restore-me")
        assert got is not None and (got.spec, got.created) == (want_job.spec, want_job.created)  # manifest included
        reg = again.get(ModelRegistry)
        assert (reg.models(), reg.versions("m"), reg.aliases("m")) == want_registry
        assert reg.champion("m") is not None and reg.champion("m").sha256 == SHA
        leader = await one_leader(again)
        assert leader.epoch is not None and leader.epoch > epoch  # the term came back: epochs keep growing
        assert again.stats()["state_forged"] == 0

        before = [len(await read_topic(dst, t)) for t in (STATE_JOBS, STATE_REGISTRY)]
        code, out = await myoloctl(tmp_path, "restore", str(archive), "--bootstrap", dst.bootstrap)
        assert code == 1 and "the target cluster is not empty" in out and f"{STATE_JOBS} (" in out, out
        assert [len(await read_topic(dst, t)) for t in (STATE_JOBS, STATE_REGISTRY)] == before
    finally:
        for svc in list(services.running):
            await services.stop(svc)
