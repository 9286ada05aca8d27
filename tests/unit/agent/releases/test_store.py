"""The links that choose a release: atomic switches, previous for rollback, the base install, pruning."""

from __future__ import annotations

import os

import msgspec
import pytest

from myolo.agent.releases import ReleaseError, ReleaseInfo, ReleaseStore
from myolo.agent.releases.store import RELEASE_FILE


def fake_install(store: ReleaseStore, version: str, at: float) -> None:
    """A release directory as install_release leaves it (the install itself is test_install's)."""
    store.path(version).mkdir(parents=True)
    info = ReleaseInfo(version=version, sha256="a" * 64, installed_at=at, artifact=f"/w/{version}.whl")
    (store.path(version) / RELEASE_FILE).write_bytes(msgspec.json.encode(info))


@pytest.fixture
def store(tmp_path) -> ReleaseStore:
    s = ReleaseStore(tmp_path / "releases", "agent")
    for i, version in enumerate(["1.0", "1.1", "1.2"]):
        fake_install(s, version, 100.0 + i)
    return s


def test_the_first_switch_leaves_the_base_install_and_records_its_version(store) -> None:
    assert store.current() is None and store.previous() is None
    switched = store.switch("1.0", base="0.9")
    assert (switched.version, switched.previous, switched.changed) == ("1.0", "0.9", True)
    assert os.readlink(store.dir / "current") == "1.0"  # relative: the tree can move
    assert store.current() == "1.0" and store.previous() is None and store.base() == "0.9"
    assert (store.current_path / RELEASE_FILE).is_file()


def test_each_switch_keeps_the_one_before_as_previous_and_replaces_links_atomically(store) -> None:
    store.switch("1.0", base="0.9")
    switched = store.switch("1.1")
    assert (switched.previous, store.current(), store.previous()) == ("1.0", "1.1", "1.0")
    again = store.switch("1.1")
    assert not again.changed and store.previous() == "1.0"
    assert sorted(p.name for p in store.dir.iterdir() if p.name.startswith(".")) == []  # no temporary link left
    with pytest.raises(ReleaseError, match=r"2\.0 is not installed"):
        store.switch("2.0")


def test_rollback_switches_to_an_installed_version_or_back_to_the_base_install(store) -> None:
    store.switch("1.0", base="0.9")
    store.switch("1.2")
    back = store.rollback("1.0")
    assert (back.version, back.previous, store.current(), store.previous()) == ("1.0", "1.2", "1.0", "1.2")
    base = store.rollback("0.9")
    assert (base.version, base.previous) == (None, "1.0")
    assert not (store.dir / "current").exists() and store.current() is None and store.previous() == "1.0"
    assert store.switch("1.1", base="0.9").previous == "0.9"  # from the base again


def test_rollback_to_a_version_not_here_is_refused_naming_what_is(store) -> None:
    store.switch("1.1", base="0.9")
    with pytest.raises(ReleaseError) as caught:
        store.rollback("0.5")
    assert caught.value.field == "args.version"
    assert caught.value.reason == (
        "agent 0.5 is not installed on this node; installed: 1.0, 1.1, 1.2 (current 1.1); base install 0.9"
    )
    assert store.current() == "1.1"


def test_prune_keeps_the_newest_and_never_the_current_or_previous(store) -> None:
    for i, version in enumerate(["1.3", "1.4"]):
        fake_install(store, version, 200.0 + i)
    store.switch("1.0", base="0.9")
    store.switch("1.1")  # current 1.1, previous 1.0: the two oldest
    assert store.prune(3) == ["1.2", "1.3"]
    assert [i.version for i in store.installed()] == ["1.0", "1.1", "1.4"]
    assert store.prune(3) == []
    assert store.prune(2) == ["1.4"]
    assert [i.version for i in store.installed()] == ["1.0", "1.1"]
    assert sorted(p.name for p in store.dir.iterdir()) == ["1.0", "1.1", "base.json", "current", "previous"]


def test_a_dangling_current_link_counts_as_the_base_install(store) -> None:
    store.switch("1.0", base="0.9")
    (store.path("1.0") / RELEASE_FILE).unlink()
    assert store.current() is None
