"""OpenTelemetry SDK set-up for metrics and traces. Exporters are chosen by configuration; none by default.

``none`` keeps the SDK providers (so in-process readers and trace context work) without exporting;
``console`` prints to stderr (debugging); ``otlp`` sends to an OTLP/HTTP endpoint (optional extra
``myolotrain[otlp]``).
"""

from __future__ import annotations

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from myolo.common.errors import ConfigError
from myolo.common.telemetry_settings import TelemetrySettings


def resource(service: str, instance: str | None = None) -> Resource:
    """``service.name`` and, given, ``service.instance.id`` (the node or member id), which Prometheus's OTLP
    receiver turns into the ``job`` and ``instance`` labels."""
    attrs = {"service.name": service, "service.namespace": "myolo"}
    if instance:
        attrs["service.instance.id"] = instance
    return Resource.create(attrs)


def metric_readers(settings: TelemetrySettings) -> list[MetricReader]:
    """The exporting reader ``settings`` asks for (none for ``none``)."""
    interval_ms = int(settings.metric_interval_s * 1000)
    if settings.exporter == "console":
        return [PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=interval_ms)]
    if settings.exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        except ImportError:
            raise ConfigError("telemetry.exporter", "otlp needs `pip install myolotrain[otlp]`") from None
        endpoint = f"{settings.otlp_endpoint.rstrip('/')}/v1/metrics"
        return [
            PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint), export_interval_millis=interval_ms)
        ]
    return []


def setup_telemetry(
    service: str,
    settings: TelemetrySettings | None = None,
    *,
    extra_readers: list[MetricReader] | None = None,
    instance: str | None = None,
) -> tuple[TracerProvider, MeterProvider]:
    """Install global tracer and meter providers for ``service``."""
    settings = settings or TelemetrySettings()
    res = resource(service, instance)
    tracer_provider = TracerProvider(resource=res)
    if settings.exporter == "console":
        tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif settings.exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError("telemetry.exporter", "otlp needs `pip install myolotrain[otlp]`") from None
        ep = settings.otlp_endpoint.rstrip("/")
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{ep}/v1/traces")))
    readers = [*(extra_readers or []), *metric_readers(settings)]
    meter_provider = MeterProvider(resource=res, metric_readers=readers)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return tracer_provider, meter_provider
