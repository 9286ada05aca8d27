"""The command actions are declared once (``ACTIONS``): the names a command may carry, the decoding of its
arguments, the result types and the documented list all come from that one tuple."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import msgspec
import pytest

from myolo.events.codec import decode, encode
from myolo.events.envelope import new_event
from myolo.events.errors import InvalidEvent
from myolo.events.payloads import Command
from myolo.events.payloads.commands import (
    ACTION_ARGS,
    ACTION_NAMES,
    ACTION_RESULTS,
    ACTIONS,
    ActionArgs,
    ActionResult,
    CommandAction,
    SetIntervalArgs,
    action_args,
)

EVENTS_MD = Path(__file__).resolve().parents[4] / "docs" / "events.md"


def result_name(tp: object) -> str:
    """``SetIntervalResult``, or ``dict[str, FileDigest]`` for a result keyed by path."""
    args = typing.get_args(tp)
    return f"dict[str, {args[1].__name__}]" if args else tp.__name__  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", ACTIONS, ids=lambda c: c.action)
def test_each_action_declares_its_name_args_result_and_doc(cls: type[ActionArgs]) -> None:
    assert issubclass(cls, ActionArgs) and re.fullmatch(r"[a-z][a-z_]*", cls.action)
    assert (cls.__doc__ or "").strip(), f"{cls.__name__} needs a docstring: it says what {cls.action} does"
    result = cls.result
    value = typing.get_args(result)[1] if typing.get_origin(result) is dict else result
    assert isinstance(value, type) and issubclass(value, ActionResult), f"{cls.action}: result {result!r}"


def test_names_args_and_results_are_derived_from_the_one_tuple() -> None:
    assert len(set(ACTION_NAMES)) == len(ACTIONS), "two Structs declare the same action"
    assert typing.get_args(CommandAction) == ACTION_NAMES == tuple(c.action for c in ACTIONS)
    assert {c.action: c for c in ACTIONS} == ACTION_ARGS
    assert {c.action: c.result for c in ACTIONS} == ACTION_RESULTS
    assert "checkpoint" not in ACTION_NAMES  # "save now" rides on stop_workers; see docs/events.md


def test_a_command_of_an_unknown_action_fails_decoding_naming_the_field() -> None:
    good = Command(command_id="c", node_id="n", epoch=1, action="set_interval", args={"interval_s": 2})
    key, value, headers = encode(new_event(good, "/myolo/coordinator/t"))
    assert decode(value, headers, key).data == good
    bad = value.replace(b'"set_interval"', b'"checkpoint"')
    with pytest.raises(InvalidEvent) as err:
        decode(bad, headers, key)
    assert err.value.field == "data.action" and "'checkpoint'" in err.value.reason


def test_args_decode_into_the_actions_struct_and_wrong_args_name_the_field() -> None:
    assert action_args("set_interval", {"interval_s": 2}) == SetIntervalArgs(interval_s=2.0)
    with pytest.raises(InvalidEvent) as err:
        action_args("set_interval", {"interval_s": "soon"})
    assert (err.value.field, err.value.reason) == ("args.interval_s", "Expected `float`, got `str`")
    with pytest.raises(InvalidEvent) as err:
        action_args("drain", {"draining": True, "why": "x"})
    assert err.value.field == "args.why" and "it takes draining, reason" in err.value.reason
    with pytest.raises(InvalidEvent, match="use one of set_interval, report_sample"):
        action_args("checkpoint", {})


def test_args_with_defaults_only_travel_as_json_and_back() -> None:
    """The wire form the coordinator sends (every field, defaults too) reads back as the same Struct."""
    for cls in ACTIONS:
        if any(f.required for f in msgspec.structs.fields(cls)):
            continue  # those with required fields have tests of their own
        wire = msgspec.json.decode(msgspec.json.encode(msgspec.to_builtins(msgspec.structs.asdict(cls()))))
        assert action_args(cls.action, wire) == cls()


def documented_actions() -> list[tuple[str, str, str]]:
    """The rows of the commands table in docs/events.md: (action, args Struct, result type)."""
    text = EVENTS_MD.read_text(encoding="utf-8")
    section = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \| `([A-Za-z]+)` \| `([^`]+)` \|", section, flags=re.MULTILINE)
    return [(a, b, c) for a, b, c in rows]


def test_the_documented_actions_are_the_table() -> None:
    expected = [(c.action, c.__name__, result_name(c.result)) for c in ACTIONS]
    rows = "\n".join(f"| `{a}` | `{b}` | `{c}` | ... |" for a, b, c in expected)
    assert documented_actions() == expected, f"docs/events.md, ## Commands: the table's rows are\n{rows}"
