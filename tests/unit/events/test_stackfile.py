"""The local stack's bootstrap, read from its state file: used when a setting says ``local`` or myoloctl asks."""

from __future__ import annotations

from pathlib import Path

import pytest

from myolo.common.errors import ConfigError
from myolo.events.settings import KafkaSettings
from myolo.events.stackfile import STATE_FILE, default_state_dir, local_bootstrap


def test_the_bootstrap_the_stack_recorded_is_found(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text('{"format": 1, "bootstrap": "127.0.0.1:41234", "processes": []}')
    assert local_bootstrap(tmp_path) == "127.0.0.1:41234"


@pytest.mark.parametrize("text", [None, "", "{not json", "[1, 2]", '{"bootstrap": null}', '{"bootstrap": 9092}'])
def test_no_stack_or_an_unreadable_file_is_no_bootstrap(tmp_path: Path, text: str | None) -> None:
    if text is not None:
        (tmp_path / STATE_FILE).write_text(text)
    assert local_bootstrap(tmp_path) is None


def test_settings_use_the_stack_only_when_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MYOLO_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("MYOLO_STATE_DIR", str(tmp_path))
    assert default_state_dir() == tmp_path
    with pytest.raises(ConfigError) as refused:
        KafkaSettings(bootstrap="local").resolved_bootstrap()
    assert refused.value.key == "kafka.bootstrap" and "myoloctl local up" in refused.value.reason
    (tmp_path / STATE_FILE).write_text('{"bootstrap": "127.0.0.1:5555"}')
    with pytest.raises(ConfigError) as unset:  # a daemon told nothing does not guess the stack
        KafkaSettings().resolved_bootstrap()
    assert unset.value.key == "kafka.bootstrap" and 'kafka.bootstrap = "local"' in unset.value.reason
    assert KafkaSettings(bootstrap="local").resolved_bootstrap() == "127.0.0.1:5555"
    assert KafkaSettings().resolved_bootstrap(local_fallback=True) == "127.0.0.1:5555"
    monkeypatch.setenv("MYOLO_KAFKA_BOOTSTRAP", "local")
    assert KafkaSettings().resolved_bootstrap() == "127.0.0.1:5555"
    assert KafkaSettings(bootstrap="kafka-1:9093").resolved_bootstrap() == "kafka-1:9093"
