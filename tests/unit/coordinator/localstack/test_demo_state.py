"""The demo's stack lives apart from the user's: its own directory, replaced when an earlier demo left one,
and a directory holding someone else's stack refused (never removed)."""

from __future__ import annotations

from pathlib import Path

from myolo.coordinator.localstack import demo
from myolo.coordinator.localstack.demo_state import demo_state_dir, mark, plan
from myolo.events.stackfile import STATE_FILE


def test_the_demo_never_takes_the_users_stack_directory(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path), "MYOLO_STATE_DIR": str(tmp_path / "mine")}
    assert demo_state_dir(env) == tmp_path / "myolo" / "demo"


def test_a_fresh_directory_starts_and_an_earlier_demos_is_replaced(tmp_path: Path) -> None:
    assert plan(tmp_path).action == "start"
    mark(tmp_path)
    (tmp_path / STATE_FILE).write_text("{}")
    replace = plan(tmp_path)
    assert replace.action == "replace" and "stopping it and removing its data" in replace.say


def test_a_stack_the_demo_did_not_make_is_refused_and_left_alone(tmp_path: Path, capsys) -> None:
    (tmp_path / STATE_FILE).write_text('{"security": null}')  # e.g. `myoloctl local up` (plain) put it there
    assert demo.main(["--state-dir", str(tmp_path)]) == 2
    assert "holds a stack the demo did not make" in capsys.readouterr().err
    assert (tmp_path / STATE_FILE).read_text() == '{"security": null}'
