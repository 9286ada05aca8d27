"""The periodic ``malloc_trim``: its interval from the environment, its thread, and turning it off."""

from __future__ import annotations

import threading

import pytest

from myolo.common import memtrim
from myolo.common.errors import ConfigError


def test_interval_defaults_and_reads_the_environment() -> None:
    assert memtrim.every_from_env({}) == memtrim.DEFAULT_EVERY_S
    assert memtrim.every_from_env({memtrim.ENV_EVERY: "60"}) == 60.0
    assert memtrim.every_from_env({memtrim.ENV_EVERY: "0"}) == 0.0


@pytest.mark.parametrize("raw", ["soon", "-1", "90000", "nan"])
def test_a_bad_interval_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        memtrim.every_from_env({memtrim.ENV_EVERY: raw})
    assert memtrim.ENV_EVERY in str(caught.value) and repr(raw) in str(caught.value)


def test_trims_from_a_daemon_thread_until_stopped() -> None:
    calls: list[str] = []
    twice = threading.Event()

    def trim() -> bool:
        calls.append(threading.current_thread().name)
        if len(calls) >= 2:
            twice.set()
        return True

    started = memtrim.start("agent", every_s=0.001, trim=trim)
    assert started is not None
    thread, stop = started
    assert thread.daemon and thread.name == "agent-malloc-trim"
    assert twice.wait(10.0), "the thread never trimmed twice"
    stop.set()
    thread.join(10.0)
    assert not thread.is_alive()
    assert set(calls) == {"agent-malloc-trim"}


def test_off_when_the_interval_is_zero_or_there_is_no_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    assert memtrim.start("agent", every_s=0.0, trim=lambda: True) is None
    monkeypatch.setattr(memtrim, "_libc_trim", lambda: None)
    assert memtrim.start("agent", every_s=5.0) is None


def test_the_real_trim_runs_on_this_c_library() -> None:
    trim = memtrim._libc_trim()
    assert trim is not None  # glibc on every machine this project supports
    assert trim() in (True, False)
