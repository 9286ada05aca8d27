"""State records as Kafka record values: JSON of the Struct, its kind in a header."""

from __future__ import annotations

import msgspec

from coordinator.state.records import KIND_OF, KINDS

KIND_HEADER = "myolo-state-kind"
_ENC = msgspec.json.Encoder()
_DECODERS = {kind: msgspec.json.Decoder(cls) for kind, cls in KINDS.items()}


class BadStateRecord(Exception):
    """A state record we cannot read (written by a newer version, or damaged). Readers skip it, loudly."""


def encode_state(record: msgspec.Struct) -> tuple[bytes, list[tuple[str, bytes]]]:
    kind = KIND_OF.get(type(record))
    if kind is None:
        raise TypeError(f"{type(record).__name__} is not a state record kind (known: {sorted(KINDS)})")
    return _ENC.encode(record), [(KIND_HEADER, kind.encode())]


def decode_state(value: bytes, headers) -> msgspec.Struct:
    kind = next((v.decode(errors="replace") for k, v in headers or () if k == KIND_HEADER), None)
    if kind is None:
        raise BadStateRecord(f"no {KIND_HEADER} header")
    dec = _DECODERS.get(kind)
    if dec is None:
        raise BadStateRecord(f"unknown state kind {kind!r} (known: {sorted(KINDS)})")
    try:
        return dec.decode(value)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise BadStateRecord(f"{kind} record does not decode: {exc}") from None
