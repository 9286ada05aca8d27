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

from events.envelope import Event

_tracer = trace.get_tracer("myolo.events")


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
