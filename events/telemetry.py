"""OpenTelemetry SDK set-up for metrics and traces. Exporters are chosen by configuration; none by default.

``none`` keeps the SDK providers (so in-process readers and trace context work) without exporting;
``console`` prints to stderr (debugging); ``otlp`` sends to an OTLP/HTTP endpoint (optional extra
``myolotrain[otlp]``).
"""

from __future__ import annotations

from typing import Literal

import msgspec
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from events.errors import ConfigError


class TelemetrySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The ``[telemetry]`` section."""

    exporter: Literal["none", "console", "otlp"] = "none"
    otlp_endpoint: str = "http://127.0.0.1:4318"
    metric_interval_s: float = 15.0


def setup_telemetry(
    service: str,
    settings: TelemetrySettings | None = None,
    *,
    extra_readers: list[MetricReader] | None = None,
) -> tuple[TracerProvider, MeterProvider]:
    """Install global tracer and meter providers for ``service``."""
    settings = settings or TelemetrySettings()
    resource = Resource.create({"service.name": service, "service.namespace": "myolo"})
    readers: list[MetricReader] = list(extra_readers or [])
    tracer_provider = TracerProvider(resource=resource)
    interval_ms = int(settings.metric_interval_s * 1000)
    if settings.exporter == "console":
        tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=interval_ms))
    elif settings.exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError("telemetry.exporter", "otlp needs `pip install myolotrain[otlp]`") from None
        ep = settings.otlp_endpoint.rstrip("/")
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{ep}/v1/traces")))
        readers.append(
            PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=f"{ep}/v1/metrics"), export_interval_millis=interval_ms
            )
        )
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return tracer_provider, meter_provider
