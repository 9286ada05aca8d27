"""The published form of a node sample: NVLink summarised, only links with something to say listed."""

from __future__ import annotations

import msgspec

from myolo.events.codec import decode, encode
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, NodeSample, NvLink, Payload
from myolo.events.payloads.compact import compact_gpu, compact_sample
from myolo.events.payloads.node import NVLINK_COUNTERS


def link(n: int, active: bool = True, **counters: int | None) -> NvLink:
    zeros: dict[str, int | None] = dict.fromkeys(NVLINK_COUNTERS, 0)
    return NvLink(link=n, active=active, **(zeros | counters))


def gpu(links: list[NvLink] | None) -> GpuReading:
    return GpuReading(index=0, uuid="GPU-x", name="H200", nvlink=links)


def sample(*gpus: GpuReading) -> NodeSample:
    return NodeSample(node_id="n1", backend="sim", gpus=list(gpus))


def test_all_links_fine_lists_none_but_keeps_the_counts() -> None:
    r = compact_gpu(gpu([link(i) for i in range(18)]))
    assert r.nvlink is None
    assert (r.nvlink_links, r.nvlink_active) == (18, 18)
    assert [r.nvlink_error_total(c) for c in NVLINK_COUNTERS] == [0, 0, 0, 0]
    doc = msgspec.json.decode(msgspec.json.encode(r))
    assert "nvlink" not in doc and doc["nvlink_replay_errors"] == 0  # a zero read stays a zero


def test_a_link_down_or_counting_errors_is_kept_with_its_counters() -> None:
    down, noisy = link(3, active=False), link(7, crc_flit_errors=5, replay_errors=2)
    r = compact_gpu(gpu([link(0), down, link(5), noisy, link(9, crc_data_errors=1)]))
    assert r.nvlink == [down, noisy, link(9, crc_data_errors=1)]
    assert (r.nvlink_links, r.nvlink_active) == (5, 4)
    assert (r.nvlink_crc_flit_errors, r.nvlink_replay_errors, r.nvlink_crc_data_errors) == (5, 2, 1)
    assert r.nvlink_recovery_errors == 0


def test_unsupported_counters_stay_absent() -> None:
    r = compact_gpu(gpu([link(0, crc_data_errors=None), link(1, crc_data_errors=None, recovery_errors=None)]))
    assert r.nvlink is None and r.nvlink_crc_data_errors is None
    assert r.nvlink_recovery_errors == 0  # one link reports it
    assert r.nvlink_link(4) == NvLink(link=4, active=True, replay_errors=0, recovery_errors=0, crc_flit_errors=0)


def test_no_nvlink_is_left_as_it_is() -> None:
    r = gpu(None)
    assert compact_gpu(r) is r
    assert r.nvlink_up is None and r.nvlink_error_total("replay_errors") is None


def test_idempotent_and_both_forms_read_the_same() -> None:
    full = gpu([link(0), link(1, active=False), link(2, replay_errors=4)])
    once = compact_gpu(full)
    assert compact_gpu(once) == once
    assert once.nvlink_up == full.nvlink_up == (2, 3)
    for c in NVLINK_COUNTERS:
        assert once.nvlink_error_total(c) == full.nvlink_error_total(c)
    for n in range(3):
        assert once.nvlink_link(n) == full.nvlink_link(n)


def test_sample_round_trips_through_the_codec() -> None:
    s = compact_sample(sample(gpu([link(0), link(1, recovery_errors=1)]), gpu(None)))
    key, value, headers = encode(new_event(s, "agent/n1"))
    assert decode(value, headers, key).data == s


def test_old_form_still_decodes_and_reads_the_same() -> None:
    """A sample from an agent that lists every link (no summary) decodes into today's schema."""
    old = {"node_id": "n1", "backend": "sim", "gpus": [msgspec.to_builtins(gpu([link(0), link(1, active=False)]))]}
    r = msgspec.json.decode(msgspec.json.encode(old), type=NodeSample).gpus[0]
    assert r.nvlink_links is None and r.nvlink_up == (1, 2) and r.nvlink_error_total("replay_errors") == 0


class OldNvLink(Payload, kw_only=True):
    link: int
    active: bool
    replay_errors: int | None = None


class OldGpu(Payload, kw_only=True):
    index: int
    uuid: str
    name: str
    nvlink: list[OldNvLink] | None = None


class OldSample(Payload, kw_only=True):
    """The schema a consumer built before the summary fields existed."""

    node_id: str
    backend: str
    gpus: list[OldGpu]


def test_a_consumer_of_the_old_schema_decodes_the_new_form() -> None:
    s = compact_sample(sample(gpu([link(0), link(1, active=False)]), gpu([link(0)])))
    old = msgspec.json.decode(msgspec.json.encode(s), type=OldSample)
    assert old.gpus[0].nvlink == [OldNvLink(link=1, active=False, replay_errors=0)]
    assert old.gpus[1].nvlink is None
