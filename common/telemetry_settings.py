"""The ``[telemetry]`` section of a daemon's config, apart from the SDK set-up: reading a config must not load
the OpenTelemetry SDK (several MiB resident) in a process that exports nothing."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec


class TelemetrySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The ``[telemetry]`` section: where OpenTelemetry metrics and traces go (set up by ``myolo.common.telemetry``).

    ``none`` exports nothing (the default: Prometheus scrapes ``/metrics`` instead); ``otlp`` pushes to an
    OTLP/HTTP collector every ``metric_interval_s``; ``console`` prints to stderr, for debugging."""

    exporter: Literal["none", "console", "otlp"] = "none"
    otlp_endpoint: str = "http://127.0.0.1:4318"
    metric_interval_s: Annotated[float, msgspec.Meta(ge=1.0, le=3600.0)] = 15.0
