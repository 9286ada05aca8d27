"""W3C trace context across Kafka: inject on produce, extract on consume, with the OpenTelemetry API.

The context rides in the event's ``traceparent``/``tracestate`` extensions (``ce_traceparent`` headers in
binary mode), so a trace started on an agent continues in the coordinator that handles the event.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind

from myolo.events.envelope import Event

_tracer = trace.get_tracer("myolo.events")


def tracing_enabled() -> bool:
    """Whether an SDK tracer provider is installed (``myolo.common.telemetry.setup_telemetry`` or a test).

    Without one, spans are no-ops and cost only time: the hot paths skip them and just forward any trace
    context the caller already has."""
    # The API's global (set once by trace.set_tracer_provider); get_tracer_provider() would read the
    # environment on every call while none is set, which costs more than the event it guards.
    provider = getattr(trace, "_TRACER_PROVIDER", None)
    return provider is not None and type(provider).__name__ != "NoOpTracerProvider"


def inject_current(extensions: dict[str, str]) -> dict[str, str]:
    """Without SDK tracing: forward the caller's trace context, if it has one, without making a span."""
    if trace.get_current_span().get_span_context().is_valid:
        extensions = dict(extensions)
        propagate.inject(extensions)
    return extensions


@contextmanager
def publish_span(event: Event, topic: str) -> Iterator[dict[str, str]]:
    """A PRODUCER span for one event; yields the extensions with the trace context injected."""
    with _tracer.start_as_current_span(
        f"{topic} publish",
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": "kafka",
            "messaging.destination.name": topic,
            "cloudevents.event_type": event.type,
            "cloudevents.event_id": event.id,
        },
    ):
        carrier = dict(event.extensions)
        propagate.inject(carrier)
        yield carrier


@contextmanager
def process_span(event: Event, topic: str) -> Iterator[trace.Span]:
    """A CONSUMER span whose parent is the producer's span, taken from the event's trace context."""
    if not tracing_enabled():
        yield trace.INVALID_SPAN
        return
    parent = propagate.extract(event.extensions)
    token = otel_context.attach(parent)
    try:
        with _tracer.start_as_current_span(
            f"{topic} process",
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "kafka",
                "messaging.destination.name": topic,
                "cloudevents.event_type": event.type,
                "cloudevents.event_id": event.id,
            },
        ) as span:
            yield span
    finally:
        otel_context.detach(token)
