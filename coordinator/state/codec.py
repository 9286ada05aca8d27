"""State records as Kafka record values: JSON of the Struct, its kind in a header.

Which kinds exist is not known here: each component declares the kinds it writes (``StateTopic``) and the
core builds one :class:`StateCodec` from all of them, so a new component adds kinds without editing this file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

KIND_HEADER = "myolo-state-kind"
_ENC = msgspec.json.Encoder()


class BadStateRecord(Exception):
    """A state record we cannot read (written by a newer version, or damaged). Readers skip it, loudly."""


def record_kind(headers: Sequence[tuple[str, bytes]] | None) -> str | None:
    """The kind header of a state record, or None when it has none (or it is not text)."""
    for name, value in headers or ():
        if name == KIND_HEADER and isinstance(value, bytes | bytearray):
            return bytes(value).decode(errors="replace")
    return None


class StateCodec:
    """Encodes and decodes the state records of the kinds it was given (``{kind: Struct}``)."""

    def __init__(self, kinds: Mapping[str, type[msgspec.Struct]]) -> None:
        self.kinds = dict(kinds)
        self._kind_of = {cls: kind for kind, cls in self.kinds.items()}
        if len(self._kind_of) != len(self.kinds):
            raise ValueError("one Struct may be registered under one state kind only")
        self._decoders = {kind: msgspec.json.Decoder(cls) for kind, cls in self.kinds.items()}

    def kind_of(self, record: msgspec.Struct) -> str:
        kind = self._kind_of.get(type(record))
        if kind is None:
            raise TypeError(f"{type(record).__name__} is not a state record kind (known: {sorted(self.kinds)})")
        return kind

    def encode(self, record: msgspec.Struct) -> tuple[bytes, list[tuple[str, bytes]]]:
        kind = self.kind_of(record)
        return _ENC.encode(record), [(KIND_HEADER, kind.encode())]

    def decode(self, value: bytes, headers: Sequence[tuple[str, bytes]] | None) -> msgspec.Struct:
        """The record, or :class:`BadStateRecord` whatever is wrong with it (it never raises anything else). A kind
        whose valid records may hold an earlier form inside (a manifest's text) reads it as today's
        (``upgraded``)."""
        record = self._decode(value, headers)
        upgraded = getattr(record, "upgraded", None)
        return record if upgraded is None else upgraded()

    def _decode(self, value: bytes, headers: Sequence[tuple[str, bytes]] | None) -> msgspec.Struct:
        kind = record_kind(headers)
        if kind is None:
            raise BadStateRecord(f"no {KIND_HEADER} header")
        dec = self._decoders.get(kind)
        if dec is None:
            raise BadStateRecord(f"unknown state kind {kind!r} (known: {sorted(self.kinds)})")
        try:
            return dec.decode(value)
        except msgspec.ValidationError as exc:
            earlier = getattr(self.kinds[kind], "from_flat", None)  # a kind that split its fields into spec/status
            if earlier is None:
                raise BadStateRecord(f"{kind} record does not decode: {exc}") from None
            try:
                return earlier(value)
            except (msgspec.ValidationError, msgspec.DecodeError, TypeError):
                raise BadStateRecord(f"{kind} record does not decode: {exc}") from None
            except RecursionError:
                raise BadStateRecord(f"{kind} record is nested too deeply to decode") from None
        except msgspec.DecodeError as exc:
            raise BadStateRecord(f"{kind} record does not decode: {exc}") from None
        except RecursionError:
            raise BadStateRecord(f"{kind} record is nested too deeply to decode") from None
