"""The ``hash_files`` action: real files hashed in a thread, anything but a regular file refused with the
reason, ``max_bytes`` bounding what one command reads, and the daemon answering the signed command."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from myolo.agent.commands import CommandExecutor
from myolo.agent.commands.args import ArgsError, command_args
from myolo.agent.commands.hash_files import hash_files_action, hash_one, hash_paths
from myolo.common.clock import SimClock
from myolo.common.keys import HmacKey
from myolo.events.envelope import new_event
from myolo.events.payloads import Command, CommandAck
from myolo.events.payloads.commands import HashFilesArgs
from myolo.events.signing import Verifier, sign

KEY = HmacKey("coordinator", b"k" * 32)
BODY = b"tokens" * 100_000  # 600 kB: several chunks at a small chunk size


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def command(args: dict) -> Command:
    return Command(command_id="h1", node_id="n1", epoch=1, action="hash_files", args=args)


def test_a_file_is_streamed_through_sha256_in_chunks(tmp_path: Path) -> None:
    path = tmp_path / "train.bin"
    path.write_bytes(BODY)
    found = hash_one(str(path), 1 << 30, chunk=4096)
    assert (found.sha256, found.size, found.error) == (sha(BODY), len(BODY), None)
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert hash_one(str(empty), 0).sha256 == sha(b"")


def test_a_symlink_is_followed_to_its_file(tmp_path: Path) -> None:
    (tmp_path / "real.bin").write_bytes(BODY)
    (tmp_path / "link.bin").symlink_to(tmp_path / "real.bin")
    assert hash_one(str(tmp_path / "link.bin"), 1 << 30).sha256 == sha(BODY)


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer: were it opened, this test would hang."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    found = hash_one(str(fifo), 1 << 30)
    assert (
        found.sha256 is None
        and found.error == "refused: a FIFO (named pipe), not a regular file; only files are hashed"
    )


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: str(d), "refused: a directory"),
        (lambda d: "/dev/zero" if os.path.exists("/dev/zero") else pytest.skip("no /dev/zero"), "a character device"),
        (lambda d: str(d / "missing.bin"), "cannot read it: No such file or directory"),
        (lambda d: "relative/train.bin", "not an absolute path"),
    ],
)
def test_what_is_not_a_readable_regular_file_is_refused_with_the_reason(tmp_path: Path, make, words: str) -> None:
    found = hash_one(make(tmp_path), 1 << 30)
    assert found.sha256 is None and found.error is not None and words in found.error


def test_an_unreadable_file_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.bin"
    path.write_bytes(b"x")
    path.chmod(0)
    if os.geteuid() == 0:  # root reads every file: the kernel's answer to anyone else, given by hand
        real_open = os.open

        def refuse(p, *a, **kw):  # type: ignore[no-untyped-def]
            if str(p) == str(path):
                raise PermissionError(13, "Permission denied", str(p))
            return real_open(p, *a, **kw)

        monkeypatch.setattr("myolo.agent.commands.hash_files.os.open", refuse)
    assert "cannot read it: Permission denied" in (hash_one(str(path), 10).error or "")


def test_max_bytes_bounds_the_whole_command_and_a_file_that_does_not_fit_is_not_read(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.bin", tmp_path / "b.bin", tmp_path / "c.bin"
    a.write_bytes(b"a" * 600)
    b.write_bytes(b"b" * 500)
    c.write_bytes(b"c" * 400)
    found = hash_paths([str(a), str(b), str(c), str(a)], max_bytes=1000)
    assert list(found) == [str(a), str(b), str(c)]  # a path given twice is read once
    assert (found[str(a)].sha256, found[str(a)].size) == (sha(b"a" * 600), 600)
    assert found[str(b)].sha256 is None and found[str(b)].size == 500
    assert found[str(b)].error == "not hashed: 500 bytes, more than the 400 left of this command's max_bytes"
    assert (found[str(c)].sha256, found[str(c)].size) == (sha(b"c" * 400), 400)  # exactly what was left


def test_a_file_longer_than_its_stat_said_stops_at_the_bound() -> None:
    """/proc files stat as 0 bytes but read as many: the bound holds on what is read, not on the stat."""
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc")
    found = hash_one("/proc/self/status", 16, chunk=8)
    assert found.sha256 is None and "grew past the 16 bytes left of max_bytes" in (found.error or "")


def test_the_arguments_are_checked_before_the_command_is_taken() -> None:
    assert command_args(command({"paths": ["/d/a.bin"]})) == HashFilesArgs(paths=["/d/a.bin"], max_bytes=1 << 40)
    for args, field in [
        ({"paths": []}, "args.paths"),
        ({"paths": ["/a"], "max_bytes": 0}, "args.max_bytes"),
        ({"paths": [""]}, "args.paths[0]"),
        ({"path": ["/a"]}, "args.path"),
        ({}, "args.paths"),
    ]:
        with pytest.raises(ArgsError) as err:
            command_args(command(args))
        assert err.value.field == field


async def test_the_signed_command_is_acked_with_each_paths_answer(tmp_path: Path) -> None:
    data = tmp_path / "train.bin"
    data.write_bytes(BODY)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    acks: list[CommandAck] = []

    class Acks:
        async def send(self, payload) -> None:
            acks.append(payload)

    clock = SimClock()
    executor = CommandExecutor(
        "n1", tmp_path / "ledger", Verifier([KEY]), Acks(), {"hash_files": hash_files_action()}, clock
    )
    cmd = command({"paths": [str(data), str(fifo)], "max_bytes": 1 << 30})
    await executor.handle(sign(new_event(cmd, "/myolo/coordinator/t", clock=clock), KEY))
    await executor.drain()
    bad = Command(command_id="h2", node_id="n1", epoch=1, action="hash_files", args={"paths": []})
    await executor.handle(sign(new_event(bad, "/myolo/coordinator/t", clock=clock), KEY))
    await executor.drain()
    await executor.close()
    assert [a.status for a in acks] == ["accepted", "done", "rejected"], acks[1].reason
    assert acks[1].result == {
        str(data): {"sha256": sha(BODY), "size": len(BODY)},
        str(fifo): {"error": "refused: a FIFO (named pipe), not a regular file; only files are hashed"},
    }
    assert acks[2].result == {"field": "args.paths"}


async def test_the_daemon_answers_hash_files(short_dir: Path, stop_nodes) -> None:
    from tests.unit.agent.daemon.test_commands import Node
    from tests.unit.agent.daemon.test_main import play, settle

    data = short_dir / "train.bin"
    data.write_bytes(BODY)
    node = Node(short_dir)
    await node.start()
    await play(node.clock, 1.0, 0.5)
    await node.send("h1", "hash_files", paths=[str(data)])
    assert node.rt.commands is not None
    await node.rt.commands.drain()
    await settle(100)
    assert [a.status for a in node.acks("h1")] == ["accepted", "done"], node.acks("h1")[-1].reason
    assert node.acks("h1")[-1].result == {str(data): {"sha256": sha(BODY), "size": len(BODY)}}
    assert await node.stop() == 0
