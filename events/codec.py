"""CloudEvents over Kafka: encode in binary content mode, decode binary or structured mode, validate.

Binary mode (what we produce): the value is the JSON payload, the attributes travel as ``ce_*`` headers.
Structured mode (accepted from external producers): the value is a whole JSON CloudEvent. Every way a record
can be wrong ends in :class:`InvalidEvent` naming the field, so the consumer can dead-letter it and go on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec

from events.envelope import SPECVERSION, Event, parse_rfc3339
from events.errors import InvalidEvent
from events.payloads import Payload
from events.types import payload_class

Headers = Sequence[tuple[str, bytes]]
DEFAULT_MAX_BYTES = 1 << 20
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
_CORE_ATTRS = ("specversion", "id", "source", "type", "time", "subject", "datacontenttype")
_BINARY_ATTRS = ("specversion", "id", "source", "type", "time", "subject")
_TRACE_HEADERS = ("traceparent", "tracestate")
_EXTENSION_NAME = re.compile(r"^[a-z0-9]{1,20}$")
_ENCODER = msgspec.json.Encoder()
_DECODERS: dict[type, msgspec.json.Decoder] = {}
_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`$")


def encode(event: Event) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """Binary content mode: returns ``(key, value, headers)`` for the Kafka record."""
    value = _ENCODER.encode(event.data)
    headers = [
        ("ce_specversion", b"1.0"),
        ("ce_id", event.id.encode()),
        ("ce_source", event.source.encode()),
        ("ce_type", event.type.encode()),
        ("content-type", b"application/json"),
    ]
    if event.time is not None:
        headers.append(("ce_time", event.time.encode()))
    if event.subject is not None:
        headers.append(("ce_subject", event.subject.encode()))
    for name, val in event.extensions.items():
        headers.append((f"ce_{name}", val.encode()))
    return (event.key.encode() if event.key is not None else None), value, headers


def encode_structured(event: Event) -> bytes:
    """Structured content mode (one JSON object), as external producers may send and `events validate` reads."""
    doc: dict[str, Any] = {
        "specversion": SPECVERSION,
        "id": event.id,
        "source": event.source,
        "type": event.type,
        "datacontenttype": "application/json",
    }
    if event.time is not None:
        doc["time"] = event.time
    if event.subject is not None:
        doc["subject"] = event.subject
    if event.key is not None:
        doc["partitionkey"] = event.key
    doc.update(event.extensions)
    doc["data"] = msgspec.Raw(_ENCODER.encode(event.data))
    return _ENCODER.encode(doc)


def decode(
    value: bytes | None,
    headers: Headers = (),
    key: bytes | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Event:
    """Decode and validate one Kafka record into an :class:`Event`, or raise :class:`InvalidEvent`.

    One pass over the headers sorts them into CloudEvents attributes, extensions and the content type; this
    is the consumer's hot path, measured by tests/benchmarks/bench_codec.py.
    """
    if value is None:
        raise InvalidEvent("record has no value (tombstone or empty message)", "value")
    if len(value) > max_bytes:
        raise InvalidEvent(f"record of {len(value)} bytes is over the {max_bytes}-byte limit", "value")
    key_str = _text(key, "key") if key is not None else None
    attrs: dict[str, str | None] = dict.fromkeys(_BINARY_ATTRS)
    extensions: dict[str, str] = {}
    ctype: str | None = None
    for name, raw in headers or ():
        name = name.lower()
        text = "" if raw is None else _text(raw, f"header {name}")
        if name.startswith("ce_"):
            attr = name[3:]
            if attr in attrs:
                attrs[attr] = text
            elif attr != "datacontenttype":
                extensions[attr] = text
        elif name == "content-type":
            ctype = text
        elif name in _TRACE_HEADERS:
            extensions[name] = text
    if attrs["specversion"] is None or (ctype is not None and ctype.startswith(STRUCTURED_CONTENT_TYPE)):
        return decode_structured(value, key=key_str)
    _check_envelope(attrs, prefix="header ce_")
    if ctype is not None and not ctype.startswith("application/json"):
        raise InvalidEvent(f"unsupported content type {ctype!r}; use application/json", "header content-type")
    return Event(
        id=attrs["id"],  # type: ignore[arg-type]
        source=attrs["source"],  # type: ignore[arg-type]
        type=attrs["type"],  # type: ignore[arg-type]
        time=attrs["time"],
        subject=attrs["subject"],
        data=decode_data(attrs["type"], value),  # type: ignore[arg-type]
        key=key_str,
        extensions=extensions,
        raw_data=value,
    )


def decode_structured(value: bytes, *, key: str | None = None) -> Event:
    """Decode a JSON CloudEvent (structured content mode)."""
    try:
        doc = msgspec.json.decode(value)
    except msgspec.DecodeError as exc:
        raise InvalidEvent(f"value is not valid JSON ({exc})", "value") from None
    if not isinstance(doc, dict):
        raise InvalidEvent(f"a structured CloudEvent is a JSON object, got {type(doc).__name__}", "value")
    if "specversion" not in doc:
        raise InvalidEvent("not a CloudEvent: no ce_specversion header and no specversion attribute", "specversion")
    attrs = {}
    for name in ("specversion", "id", "source", "type", "time", "subject"):
        v = doc.get(name)
        if v is not None and not isinstance(v, str):
            raise InvalidEvent(f"must be a string, got {type(v).__name__}", name)
        attrs[name] = v
    _check_envelope(attrs)
    if "data_base64" in doc:
        raise InvalidEvent("data_base64 is not supported: send JSON data", "data_base64")
    if "data" not in doc:
        raise InvalidEvent("missing: the event has no data", "data")
    ctype = doc.get("datacontenttype")
    if ctype is not None and not str(ctype).startswith("application/json"):
        raise InvalidEvent(f"unsupported content type {ctype!r}; use application/json", "datacontenttype")
    cls = payload_class(attrs["type"])
    try:
        data = msgspec.convert(doc["data"], cls)
    except msgspec.ValidationError as exc:
        raise _field_error(exc) from None
    extensions = {k: str(v) for k, v in doc.items() if k not in _CORE_ATTRS and k not in ("data", "partitionkey")}
    bad = [k for k in extensions if not _EXTENSION_NAME.match(k)]
    if bad:
        raise InvalidEvent("extension names are 1-20 lowercase letters or digits", bad[0])
    pkey = doc.get("partitionkey")
    return Event(
        id=attrs["id"],
        source=attrs["source"],
        type=attrs["type"],
        time=attrs["time"],
        subject=attrs["subject"],
        data=data,
        key=key if key is not None else (str(pkey) if pkey is not None else None),
        extensions=extensions,
        raw_data=_ENCODER.encode(doc["data"]),
    )


def decode_data(type_: str, data: bytes) -> Payload:
    """Validate JSON payload bytes against the Struct of ``type_`` (used by the CLI before sending)."""
    cls = payload_class(type_)
    dec = _DECODERS.get(cls) or _DECODERS.setdefault(cls, msgspec.json.Decoder(cls))
    try:
        return dec.decode(data)
    except msgspec.ValidationError as exc:
        raise _field_error(exc) from None
    except msgspec.DecodeError as exc:
        raise InvalidEvent(f"payload is not valid JSON ({exc})", "data") from None


def _check_envelope(attrs: dict[str, str | None], prefix: str = "") -> None:
    if attrs["specversion"] != SPECVERSION:
        raise InvalidEvent(
            f"unsupported CloudEvents specversion {attrs['specversion']!r}; expected '1.0'", f"{prefix}specversion"
        )
    for name in ("id", "source", "type"):
        if not attrs[name]:
            raise InvalidEvent("missing required CloudEvents attribute", f"{prefix}{name}")
    if attrs["time"] is not None:
        try:
            parse_rfc3339(attrs["time"])
        except ValueError:
            raise InvalidEvent(f"not an RFC 3339 timestamp: {attrs['time']!r}", f"{prefix}time") from None


def _text(raw: bytes, field: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise InvalidEvent("not valid UTF-8", field) from None


def _field_error(exc: msgspec.ValidationError) -> InvalidEvent:
    """Turn msgspec's ``Expected int, got str - at `$.gpus[0].index``` into field ``data.gpus[0].index``."""
    m = _AT.match(str(exc))
    msg, path = (m.group("msg"), m.group("path") or "") if m else (str(exc), "")
    missing = _MISSING.match(msg)
    if missing:
        path = f"{path}.{missing.group('name')}"
        msg = "missing required field"
    return InvalidEvent(msg, "data" + path)
