"""A running agent publishes the kernel log's XIDs as faults with the kernel's line, and an XID that NVML's
event path and the kernel log both report is published once (a file stands in for /dev/kmsg)."""

from __future__ import annotations

from pathlib import Path

import pytest

from myolo.agent.gpu.sim import sim_pci_bus_id
from myolo.agent.kernlog.parse import pci_key
from myolo.events.payloads import NodeFault
from tests.unit.agent.daemon.test_commands import Node
from tests.unit.agent.daemon.test_main import play

pytestmark = pytest.mark.usefixtures("stop_nodes")


def kernel_line(gpu: int, xid: int, text: str = "GPU has fallen off the bus.") -> str:
    bus = pci_key(sim_pci_bus_id(gpu))
    return f"6,901,{gpu}000,-;NVRM: Xid (PCI:{bus}): {xid}, pid=4242, name=python3, {text}\n"


def xid_faults(node: Node) -> list[NodeFault]:
    return [e.data for _, e in node.broker.events if isinstance(e.data, NodeFault) and e.data.kind == "xid"]


async def start(short_dir: Path) -> tuple[Node, Path]:
    kmsg = short_dir / "kmsg"
    kmsg.write_text("6,1,1,-;Linux version 6.8.0\n")
    toml = f"[kernel_log]\nsource = 'kmsg'\npath = '{kmsg}'\npoll_interval_s = 0.5\ndedup_window_s = 30\n"
    node = Node(short_dir, commands=False, toml=toml)
    await node.start()
    await play(node.clock, 2.0, 0.5)  # a first sample: the GPUs' PCI addresses are known
    return node, kmsg


async def test_a_kernel_xid_is_a_fault_on_its_gpu_with_the_kernel_line(short_dir: Path) -> None:
    node, kmsg = await start(short_dir)
    with kmsg.open("a") as f:
        f.write(kernel_line(1, 79))
    await play(node.clock, 2.0, 0.5)
    (fault,) = xid_faults(node)
    assert (fault.xid, fault.gpu_index, fault.health) == (79, 1, "fail")
    assert fault.message is not None and fault.message.startswith(f"NVRM: Xid (PCI:{pci_key(sim_pci_bus_id(1))}): 79")
    assert fault.reasons == [
        "xid 79 (fallen off the bus)",
        "kernel log: pid 4242 (python3): GPU has fallen off the bus.",
    ]
    await node.stop()


async def test_an_xid_nvml_reported_is_not_published_again_from_the_kernel_log(short_dir: Path) -> None:
    node, kmsg = await start(short_dir)
    node.backend.inject_xid(0, 48)
    await play(node.clock, 1.0, 0.5)
    with kmsg.open("a") as f:
        f.write(kernel_line(0, 48, "An uncorrectable double bit error (DBE) has been detected on GPU."))
    await play(node.clock, 2.0, 0.5)
    assert [(f.xid, f.gpu_index, f.message) for f in xid_faults(node)] == [(48, 0, None)]  # NVML's, alone
    await play(node.clock, 40.0, 5.0)  # past the window: the same XID again is a new one
    with kmsg.open("a") as f:
        f.write(kernel_line(0, 48, "again"))
    await play(node.clock, 2.0, 0.5)
    assert [f.xid for f in xid_faults(node)] == [48, 48]
    await node.stop()


async def test_a_kernel_xid_first_makes_nvmls_report_the_echo(short_dir: Path) -> None:
    node, kmsg = await start(short_dir)
    with kmsg.open("a") as f:
        f.write("garbage \xff\n" + "z" * 100_000 + "\n" + kernel_line(1, 31, "MMU Fault"))
    await play(node.clock, 2.0, 0.5)
    node.backend.inject_xid(1, 31)
    await play(node.clock, 2.0, 0.5)
    faults = xid_faults(node)
    assert [(f.xid, f.gpu_index) for f in faults] == [(31, 1)]
    assert faults[0].message is not None and "MMU Fault" in faults[0].message
    assert node.task is not None and not node.task.done()  # the hostile lines cost the agent nothing
    await node.stop()
