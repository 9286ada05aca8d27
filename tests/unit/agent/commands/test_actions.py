"""Command arguments (checked before a command is taken) and the nccl_probe action end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from myolo.agent.commands import CommandExecutor, CommandsConfig, commands_state_dir, load_verifier, nccl_probe_action
from myolo.agent.commands.args import ArgsError, command_args
from myolo.agent.commands.probe import probe_spec
from myolo.agent.nccl.probe import ProbeSpec
from myolo.common.clock import SimClock
from myolo.common.errors import ConfigError
from myolo.common.keys import HmacKey, load_signer
from myolo.events.envelope import new_event
from myolo.events.payloads import BandwidthReport, Command, CommandAck
from myolo.events.payloads.commands import NcclProbeArgs, SetIntervalArgs
from myolo.events.signing import Verifier, sign
from tests.support.helpers import new_ed25519_key, write_key

KEY = HmacKey("coordinator", b"k" * 32)


def probe(args: dict) -> Command:
    return Command(command_id="p1", node_id="n1", epoch=1, action="nccl_probe", args=args)


def test_probe_arguments_become_a_probe_spec() -> None:
    args = command_args(probe({"world_size": 4, "sizes": [1024, 1 << 20], "backend": "gloo", "timeout_s": 60}))
    assert args == NcclProbeArgs(world_size=4, sizes=[1024, 1 << 20], backend="gloo", timeout_s=60.0)
    assert probe_spec(args) == ProbeSpec(world_size=4, backend="gloo", sizes=(1024, 1 << 20))
    assert probe_spec(command_args(probe({}))) == ProbeSpec()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"world_size": 1}, "args.world_size"),
        ({"world_size": 2.5}, "args.world_size"),
        ({"sizes": []}, "args.sizes"),
        ({"sizes": "1m"}, "args.sizes"),
        ({"sizes": [4096, -1]}, "args.sizes[1]"),
        ({"sizes": [True]}, "args.sizes[0]"),
        ({"backend": "mpi"}, "args.backend"),
        ({"iters": 0}, "args.iters"),
        ({"timeout_s": 0}, "args.timeout_s"),
        ({"size": [1]}, "args.size"),
    ],
)
def test_bad_probe_arguments_name_the_field(args: dict, field: str) -> None:
    with pytest.raises(ArgsError) as err:
        command_args(probe(args))
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_interval_bounds_are_inclusive_and_booleans_are_not_numbers() -> None:
    cmd = Command(command_id="i", node_id="n1", epoch=1, action="set_interval", args={"interval_s": 0.05})
    assert command_args(cmd) == SetIntervalArgs(interval_s=0.05)
    with pytest.raises(ArgsError, match=r"args\.interval_s: Expected `float`, got `bool`"):
        command_args(Command(command_id="i", node_id="n1", epoch=1, action="set_interval", args={"interval_s": True}))


# What myolo.kernels.probe.allreduce prints; run as `python -c` so the test needs neither torch nor spawned ranks.
FAKE_PROBE = (
    "import json, sys; a = sys.argv; sizes = a[a.index('--sizes') + 1].split(','); "
    "print(json.dumps({'backend': 'gloo', 'world_size': int(a[a.index('--world-size') + 1]), 'verified': True, "
    "'points': [{'size_bytes': int(s), 'time_s': 0.001} for s in sizes]}))"
)


async def test_nccl_probe_command_publishes_the_report_and_acks_a_summary(tmp_path) -> None:
    published: list = []
    acks: list[CommandAck] = []

    class Acks:
        async def send(self, payload) -> None:
            acks.append(payload)

    clock = SimClock()
    action = nccl_probe_action("n1", published.append, python=(sys.executable, "-c", FAKE_PROBE))
    executor = CommandExecutor("n1", tmp_path, Verifier([KEY]), Acks(), {"nccl_probe": action}, clock)
    cmd = probe({"world_size": 4, "sizes": [1_000_000, 2_000_000], "backend": "gloo"})
    await executor.handle(sign(new_event(cmd, "/myolo/coordinator/t", clock=clock), KEY))
    await executor.drain()
    await executor.close()
    assert [a.status for a in acks] == ["accepted", "done"], acks[-1].reason
    (report,) = published
    assert isinstance(report, BandwidthReport)
    assert report.command_id == "p1" and [p.size_bytes for p in report.points] == [1_000_000, 2_000_000]
    # 2e6 bytes in 1 ms = 2 GB/s algbw; x 2(4-1)/4 = 3 GB/s busbw
    assert acks[-1].result == {
        "backend": "gloo",
        "world_size": 4,
        "points": 2,
        "peak_busbw_gbps": 3.0,
        "peak_size_bytes": 2_000_000,
    }
    json.dumps(acks[-1].result)


async def test_a_probe_that_cannot_run_is_acked_failed_with_the_reason(tmp_path) -> None:
    acks: list[CommandAck] = []

    class Acks:
        async def send(self, payload) -> None:
            acks.append(payload)

    clock = SimClock()
    broken = (sys.executable, "-c", "import sys; sys.stderr.write(\"No module named 'torch'\"); sys.exit(3)")
    action = nccl_probe_action("n1", lambda p: None, python=broken)
    executor = CommandExecutor("n1", tmp_path, Verifier([KEY]), Acks(), {"nccl_probe": action}, clock)
    await executor.handle(sign(new_event(probe({}), "/myolo/coordinator/t", clock=clock), KEY))
    await executor.drain()
    await executor.close()
    assert [a.status for a in acks] == ["accepted", "failed"]
    assert "ProbeError: torch is not installed" in (acks[-1].reason or "")


def test_the_commands_config_names_the_key_at_fault(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"commands\.key_files: commands are enabled but no key file"):
        load_verifier(CommandsConfig(enabled=True))
    with pytest.raises(ConfigError, match=r"commands\.key_files\[0\]: cannot read"):
        load_verifier(CommandsConfig(enabled=True, key_files=[str(tmp_path / "missing.key")]))
    good = write_key(tmp_path / "good.key", "ab" * 32)
    short = write_key(tmp_path / "short.key", "abcd")
    with pytest.raises(ConfigError, match=r"commands\.key_files\[1\]: key in .* is 2 bytes"):
        load_verifier(CommandsConfig(enabled=True, key_files=[str(good), str(short)]))
    good.chmod(0o640)  # a shared secret others can read is no secret
    with pytest.raises(ConfigError, match=r"commands\.key_files\[0\]: .*chmod 600"):
        load_verifier(CommandsConfig(enabled=True, key_files=[str(good)]))
    good.chmod(0o600)
    event = sign(new_event(probe({}), "/myolo/coordinator/t"), load_signer(good))
    load_verifier(CommandsConfig(enabled=True, key_files=[str(good)])).verify(event)
    # the coordinators' Ed25519 key: the agent holds the public half, which anyone may read
    signer = new_ed25519_key(tmp_path / "coordinator.key")
    public = tmp_path / "coordinator.key.pub"
    public.chmod(0o644)
    verifier = load_verifier(CommandsConfig(enabled=True, key_files=[str(public), str(good)]))
    verifier.verify(sign(new_event(probe({}), "/myolo/coordinator/t"), signer))
    verifier.verify(event)  # both keys trusted during a rotation
    assert commands_state_dir(CommandsConfig(), "/var/lib/myolo") == Path("/var/lib/myolo/commands")
