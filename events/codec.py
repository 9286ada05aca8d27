"""CloudEvents over Kafka: encode in binary content mode, decode binary or structured mode, validate.

Binary mode (what we produce): the value is the JSON payload, the attributes travel as ``ce_*`` headers.
Structured mode (accepted from external producers): the value is a whole JSON CloudEvent. Every way a record
can be wrong ends in :class:`InvalidEvent` naming the field, so the consumer can dead-letter it and go on;
every size is bounded by :mod:`myolo.events.limits`, and a reason over a limit names it.

Depth: the payload is decoded straight into its Struct, whose typed fields nest as deep as the schema and no
deeper, so the hot path scans nothing. Only ``Any``-typed fields (a command's ``args``, an ack's ``result``)
can hold deeper values: those are walked, up to the limit, after decoding, when the payload has more
brackets than the limit (else it cannot nest that deep, and nothing is walked). Anything deeper than the
interpreter allows (an unknown field nesting thousands of arrays, which msgspec skips recursively) stops the
decoder with ``RecursionError``, reported as the same limit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec
import msgspec.inspect as mi

from myolo.events.envelope import SPECVERSION, Event, parse_rfc3339
from myolo.events.errors import InvalidEvent
from myolo.events.limits import (
    ATTRIBUTE_BYTES,
    EXTENSION_NAME,
    MAX_DEPTH,
    MAX_EXTENSIONS,
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    MAX_KEY_BYTES,
    MAX_RECORD_BYTES,
    cut,
    over,
)
from myolo.events.payloads import Payload
from myolo.events.types import PAYLOAD_TYPES, payload_class

Headers = Sequence[tuple[str, bytes]]
DEFAULT_MAX_BYTES = MAX_RECORD_BYTES
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
TOO_DEEP = f"nests deeper than {MAX_DEPTH} levels of arrays and objects; the limit is {MAX_DEPTH}"
_CORE_ATTRS = ("specversion", "id", "source", "type", "time", "subject", "datacontenttype")
_BINARY_ATTRS = ("specversion", "id", "source", "type", "time", "subject")
_NOT_EXTENSIONS = frozenset((*_CORE_ATTRS, "data", "data_base64", "partitionkey"))
_TRACE_HEADERS = ("traceparent", "tracestate")
_ATTRIBUTE_HEADERS = {f"ce_{attr}": (attr, limit) for attr, limit in ATTRIBUTE_BYTES.items()}
_ENCODER = msgspec.json.Encoder()
_DECODERS: dict[type, msgspec.json.Decoder] = {}
_STRUCTURED = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ATTRIBUTE = msgspec.json.Decoder(str | None)
_EXTENSION_VALUE = msgspec.json.Decoder(str | int | bool | None)
_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`$")
_CONTAINERS = (dict, list, tuple, msgspec.Struct)
_JSON_KINDS = {ord("{"): "object", ord("["): "array", ord('"'): "string", ord("t"): "boolean", ord("f"): "boolean"}


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
    headers: Headers | None = (),
    key: bytes | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Event:
    """Decode and validate one Kafka record into an :class:`Event`, or raise :class:`InvalidEvent`.

    One pass over the headers sorts them into CloudEvents attributes, extensions and the content type, and
    checks each it keeps against its limit (headers it does not read are only counted); this is the
    consumer's hot path, measured by tests/benchmarks/bench_codec.py.
    """
    if value is None:
        raise InvalidEvent("record has no value (tombstone or empty message)", "value")
    if len(value) > max_bytes:
        raise InvalidEvent(over("the record", len(value), max_bytes), "value")
    key_str = _key(key) if key is not None else None
    headers = headers or ()
    if len(headers) > MAX_HEADERS:
        raise InvalidEvent(over("the record", len(headers), MAX_HEADERS, "headers"), "headers")
    attrs: dict[str, str | None] = dict.fromkeys(_BINARY_ATTRS)
    extensions: dict[str, str] = {}
    ctype: str | None = None
    name = ""
    try:
        for name, raw in headers:
            known = _ATTRIBUTE_HEADERS.get(name)
            if known is not None and raw is not None:  # the common case, as we write them: one lookup
                attr, limit = known
                if len(raw) > limit:
                    raise InvalidEvent(over(attr, len(raw), limit), f"header {name}")
                attrs[attr] = raw.decode()
                continue
            name = name.lower()
            if raw is None:
                raw = b""
            if name.startswith("ce_"):
                attr = name[3:]
                limit = ATTRIBUTE_BYTES.get(attr)
                if limit is None:
                    _add_extension(extensions, attr, _header_text(raw, name), f"header {name}")
                elif len(raw) > limit:
                    raise InvalidEvent(over(attr, len(raw), limit), f"header {name}")
                else:
                    attrs[attr] = raw.decode()
            elif name == "content-type":
                if len(raw) > ATTRIBUTE_BYTES["datacontenttype"]:
                    raise InvalidEvent(over(name, len(raw), ATTRIBUTE_BYTES["datacontenttype"]), f"header {name}")
                ctype = raw.decode()
            elif name in _TRACE_HEADERS:
                _add_extension(extensions, name, _header_text(raw, name), f"header {name}")
    except UnicodeDecodeError:
        raise InvalidEvent("not valid UTF-8", f"header {name}") from None
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
    """Decode a JSON CloudEvent (structured content mode).

    The document is read as attribute name -> raw JSON, so its ``data`` is decoded once, straight into the
    payload's Struct, exactly as in binary mode (and its bytes as received are what a signature covers)."""
    try:
        doc = _STRUCTURED.decode(value)
    except msgspec.ValidationError as exc:
        raise InvalidEvent(f"a structured CloudEvent is a JSON object ({exc})", "value") from None
    except msgspec.DecodeError as exc:
        raise InvalidEvent(f"value is not valid JSON ({exc})", "value") from None
    except RecursionError:
        raise InvalidEvent(TOO_DEEP, "value") from None
    if "specversion" not in doc:
        raise InvalidEvent("not a CloudEvent: no ce_specversion header and no specversion attribute", "specversion")
    attrs = {name: _attribute(name, doc.get(name)) for name in _BINARY_ATTRS}
    _check_envelope(attrs)
    if "data_base64" in doc:
        raise InvalidEvent("data_base64 is not supported: send JSON data", "data_base64")
    data = doc.get("data")
    if data is None:
        raise InvalidEvent("missing: the event has no data", "data")
    ctype = _attribute("datacontenttype", doc.get("datacontenttype"))
    if ctype is not None and not ctype.startswith("application/json"):
        raise InvalidEvent(f"unsupported content type {ctype!r}; use application/json", "datacontenttype")
    extensions: dict[str, str] = {}
    for name, raw in doc.items():
        if name not in _NOT_EXTENSIONS:
            text = _extension_value(name, raw)
            if text is not None:
                _add_extension(extensions, name, text, name)
    pkey = _extension_value("partitionkey", doc.get("partitionkey"))
    if pkey is not None and len(pkey.encode()) > MAX_KEY_BYTES:
        raise InvalidEvent(over("partitionkey", len(pkey.encode()), MAX_KEY_BYTES), "partitionkey")
    raw_data = bytes(data)
    return Event(
        id=attrs["id"],  # type: ignore[arg-type]
        source=attrs["source"],  # type: ignore[arg-type]
        type=attrs["type"],  # type: ignore[arg-type]
        time=attrs["time"],
        subject=attrs["subject"],
        data=decode_data(attrs["type"], raw_data),  # type: ignore[arg-type]
        key=key if key is not None else pkey,
        extensions=extensions,
        raw_data=raw_data,
    )


def decode_data(type_: str, data: bytes) -> Payload:
    """Validate JSON payload bytes against the Struct of ``type_`` (used by the CLI before sending)."""
    cls = payload_class(type_)
    dec = _DECODERS.get(cls) or _DECODERS.setdefault(cls, msgspec.json.Decoder(cls))
    try:
        payload = dec.decode(data)
    except msgspec.ValidationError as exc:
        raise _field_error(exc) from None
    except msgspec.DecodeError as exc:
        raise InvalidEvent(f"payload is not valid JSON ({exc})", "data") from None
    except RecursionError:
        raise InvalidEvent(TOO_DEEP, "data") from None
    untyped = _UNTYPED_FIELDS.get(cls)
    if untyped and data.count(b"[") + data.count(b"{") > MAX_DEPTH:  # else it cannot nest that deep
        for name in untyped:
            if _deeper_than(getattr(payload, name), MAX_DEPTH - 1):
                raise InvalidEvent(TOO_DEEP, f"data.{name}")
    return payload


def _key(key: bytes) -> str:
    if len(key) > MAX_KEY_BYTES:
        raise InvalidEvent(over("key", len(key), MAX_KEY_BYTES), "key")
    try:
        return key.decode()
    except UnicodeDecodeError:
        raise InvalidEvent("not valid UTF-8", "key") from None


def _header_text(raw: bytes, name: str) -> str:
    if len(raw) > MAX_HEADER_BYTES:
        raise InvalidEvent(over(f"header {name}", len(raw), MAX_HEADER_BYTES), f"header {name}")
    return raw.decode()


def _add_extension(extensions: dict[str, str], name: str, text: str, field: str) -> None:
    if not EXTENSION_NAME.match(name):
        raise InvalidEvent("extension names are 1-20 lowercase letters or digits", cut(field, 64))
    if len(extensions) >= MAX_EXTENSIONS and name not in extensions:
        raise InvalidEvent(over("the event", len(extensions) + 1, MAX_EXTENSIONS, "extension attributes"), field)
    extensions[name] = text


def _attribute(name: str, raw: msgspec.Raw | None) -> str | None:
    """A structured-mode context attribute: a string within its size limit."""
    return _structured_value(name, raw, _ATTRIBUTE, "a string", ATTRIBUTE_BYTES[name])


def _extension_value(name: str, raw: msgspec.Raw | None) -> str | None:
    """A structured-mode extension attribute: CloudEvents allows strings, integers and booleans."""
    return _structured_value(name, raw, _EXTENSION_VALUE, "a string, integer or boolean", MAX_HEADER_BYTES)


def _structured_value(
    name: str, raw: msgspec.Raw | None, decoder: msgspec.json.Decoder, expected: str, limit: int
) -> str | None:
    """One attribute of a structured CloudEvent as text (null is absent), within ``limit`` UTF-8 bytes."""
    if raw is None:
        return None
    try:
        value = decoder.decode(raw)
    except msgspec.DecodeError:
        raise InvalidEvent(f"must be {expected}, got {_kind(raw)}", name) from None
    if value is None:
        return None
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    if len(raw) > limit and len(text.encode()) > limit:
        raise InvalidEvent(over(name, len(text.encode()), limit), name)
    return text


def _kind(raw: msgspec.Raw) -> str:
    first = bytes(raw).lstrip()[:1]
    return _JSON_KINDS.get(first[0], "number") if first else "nothing"


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


def _deeper_than(value: object, levels: int) -> bool:
    """Whether ``value`` nests more than ``levels`` levels of containers; walks no deeper than that."""
    if isinstance(value, dict):
        children: Any = value.values()
    elif isinstance(value, list | tuple):
        children = value
    elif isinstance(value, msgspec.Struct):
        children = msgspec.structs.astuple(value)
    else:
        return False
    if levels <= 0:
        return True
    return any(isinstance(child, _CONTAINERS) and _deeper_than(child, levels - 1) for child in children)


def _holds_any(t: mi.Type) -> bool:
    """Whether a field's type can hold an ``Any`` value (the only way a typed payload nests without bound)."""
    if isinstance(t, mi.AnyType):
        return True
    if isinstance(t, mi.StructType):
        return any(_holds_any(f.type) for f in t.fields)
    inner = [getattr(t, a) for a in ("type", "item_type", "key_type", "value_type") if hasattr(t, a)]
    inner += [x for a in ("types", "item_types") for x in getattr(t, a, ())]
    return any(_holds_any(x) for x in inner)


def _untyped_fields(cls: type[Payload]) -> tuple[str, ...]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return tuple(f.name for f in info.fields if _holds_any(f.type))


_UNTYPED_FIELDS: dict[type, tuple[str, ...]] = {cls: _untyped_fields(cls) for cls in PAYLOAD_TYPES.values()}


def _field_error(exc: msgspec.ValidationError) -> InvalidEvent:
    """Turn msgspec's ``Expected int, got str - at `$.gpus[0].index``` into field ``data.gpus[0].index``."""
    m = _AT.match(str(exc))
    msg, path = (m.group("msg"), m.group("path") or "") if m else (str(exc), "")
    missing = _MISSING.match(msg)
    if missing:
        path = f"{path}.{missing.group('name')}"
        msg = "missing required field"
    return InvalidEvent(msg, "data" + path)
