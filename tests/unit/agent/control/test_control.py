"""The control socket over a real AF_UNIX stream: requests, replies, errors, permissions, stale sockets."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from myolo.agent.control import ControlError, ControlServer, InjectRequest, Reply, StatusRequest, call
from myolo.agent.control.protocol import decode_request


@pytest.fixture
def sock_path():
    d = Path(tempfile.mkdtemp(prefix="mc-", dir="/tmp"))
    yield d / "agent.sock"
    shutil.rmtree(d, ignore_errors=True)


def handler(seen: list):
    def handle(req):
        seen.append(req)
        if isinstance(req, InjectRequest) and req.gpu == 9:
            raise ValueError("--gpu 9: this node has 2 simulated GPUs (indices 0..1)")
        return Reply(ok=True, message=f"got {type(req).__name__}")

    return handle


async def test_requests_reach_the_handler_and_replies_come_back(sock_path):
    seen: list = []
    server = ControlServer(sock_path, handler(seen))
    await server.start()
    try:
        assert stat.S_IMODE(os.stat(sock_path).st_mode) == 0o600  # only the agent's user
        reply = await asyncio.to_thread(call, sock_path, InjectRequest(gpu=1, xid=79))
        assert reply.ok and reply.message == "got InjectRequest"
        assert seen == [InjectRequest(gpu=1, xid=79)]
        reply = await asyncio.to_thread(call, sock_path, StatusRequest())
        assert reply.message == "got StatusRequest"
        bad = await asyncio.to_thread(call, sock_path, InjectRequest(gpu=9, xid=79))
        assert not bad.ok and "--gpu 9" in bad.error
    finally:
        await server.stop()
    assert not sock_path.exists()


async def test_a_stale_socket_is_replaced_and_a_live_one_is_not_stolen(sock_path):
    first = ControlServer(sock_path, handler([]))
    await first.start()
    second = ControlServer(sock_path, handler([]))
    with pytest.raises(OSError, match="already listening"):
        await second.start()
    first._server.close()  # the agent died without removing its socket file
    await first._server.wait_closed()
    assert sock_path.exists()
    third = ControlServer(sock_path, handler([]))
    await third.start()
    assert (await asyncio.to_thread(call, sock_path, StatusRequest())).ok
    await third.stop()


def test_no_agent_is_a_clear_error(sock_path):
    with pytest.raises(ControlError, match="is `myolo-agent run` running"):
        call(sock_path, StatusRequest())


def test_malformed_requests_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="not a JSON object"):
        decode_request(b"{nope")
    with pytest.raises(ValueError, match="ops: 'inject', 'status'"):
        decode_request(b'{"op": "reboot"}')
    with pytest.raises(ValueError, match="bad request"):
        decode_request(b'{"op": "inject", "gpu": "zero"}')
