"""`myoloctl events produce|tail|validate`: put events on the bus, watch them, check them offline."""

from __future__ import annotations

import asyncio
import getpass
import socket
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import typer
from rich.console import Console
from rich.markup import escape

from myolo.coordinator.cli.common import Bootstrap, invalid, kafka_settings
from myolo.coordinator.cli.exits import fail
from myolo.events.bus import EventProducer
from myolo.events.bus.tail import TopicMissing, record_doc, tail_records
from myolo.events.codec import decode_data, decode_structured
from myolo.events.envelope import Event
from myolo.events.errors import InvalidEvent
from myolo.events.topics import BY_NAME, topic_for_type
from myolo.events.types import PAYLOAD_TYPES

app = typer.Typer(help="Produce, tail and validate CloudEvents on the Myolotrain bus.", no_args_is_help=True)
_encoder = msgspec.json.Encoder()


def _read_data(spec: str) -> bytes:
    if spec == "-":
        return sys.stdin.buffer.read()
    if spec.startswith("@"):
        path = Path(spec[1:])
        try:
            return path.read_bytes()
        except OSError as exc:
            fail(f"--data: cannot read {str(path)!r}: {exc.strerror}")
    return spec.encode()


@app.command()
def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to (see the topic catalogue in docs/events.md).")],
    type_: Annotated[str, typer.Option("--type", "-t", help=f"CloudEvents type, e.g. {next(iter(PAYLOAD_TYPES))}.")],
    data: Annotated[str, typer.Option("--data", "-d", help="Payload JSON: @file.json, - for stdin, or inline.")],
    source: Annotated[str | None, typer.Option(help="CloudEvents source (default: myoloctl/USER@HOST).")] = None,
    key: Annotated[str | None, typer.Option(help="Partition key (default: the entity the payload names).")] = None,
    bootstrap: Bootstrap = None,
) -> None:
    """Validate a payload against its type, then send it as a CloudEvent (exit 2 and the reason if invalid)."""
    raw = _read_data(data)
    try:
        payload = decode_data(type_, raw)
    except InvalidEvent as exc:
        invalid(exc)
    entry = BY_NAME.get(topic)
    if entry is not None and entry.types and type_ not in entry.types:
        fail(f"invalid: type: {type_!r} does not belong on topic {topic!r} (use {topic_for_type(type_)!r})")
    settings = kafka_settings(bootstrap, user="admin")  # a secured local stack: only the admin may write anywhere
    src = source or f"myoloctl/{getpass.getuser()}@{socket.gethostname()}"

    async def send() -> Event:
        async with EventProducer(settings, source=src) as producer:
            return await producer.send(producer.event(payload, key=key), topic)

    event = asyncio.run(send())
    Console(highlight=False).print(f"sent {event.type} id={event.id} key={event.key} to {topic}")


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(help="A CloudEvent in structured JSON mode; - for stdin.")],
) -> None:
    """Check a structured CloudEvent offline: exit 0 when valid, 2 with the reason when not."""
    raw = sys.stdin.buffer.read() if str(file) == "-" else _read_file(file)
    try:
        event = decode_structured(raw)
    except InvalidEvent as exc:
        invalid(exc)
    Console(highlight=False).print(f"valid: {event.type} id={event.id} source={event.source}")


def _read_file(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        fail(f"cannot read {str(file)!r}: {exc.strerror}")


@app.command()
def tail(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    from_beginning: Annotated[bool, typer.Option("--from-beginning", help="Start at the oldest record.")] = False,
    max_records: Annotated[int | None, typer.Option("--max", "-n", help="Stop after N records.")] = None,
    output: Annotated[Literal["table", "json"], typer.Option("--output", "-o", help="table or json lines.")] = "table",
    idle_timeout: Annotated[
        float | None, typer.Option("--idle-timeout", help="Stop after this many seconds without a record.")
    ] = None,
    bootstrap: Bootstrap = None,
) -> None:
    """Print the events of a topic as they arrive (invalid records are shown with the reason)."""
    settings = kafka_settings(bootstrap)
    console = Console(highlight=False, soft_wrap=True)

    async def follow() -> None:
        records = tail_records(
            settings, topic, from_beginning=from_beginning, max_records=max_records, idle_timeout=idle_timeout
        )
        async for record in records:
            _show(record_doc(record), output, console)

    try:
        asyncio.run(follow())
    except TopicMissing as exc:
        fail(str(exc), code=1)


def _show(doc: dict[str, Any], output: str, console: Console) -> None:
    if output == "json":
        sys.stdout.write(_encoder.encode(doc).decode() + "\n")
        sys.stdout.flush()
        return
    dlq = doc.get("dead_letter")
    where_s = f"{doc['partition']}:{doc['offset']}"
    if "invalid" in doc:
        reason = dlq.get("error", doc["invalid"]) if dlq else doc["invalid"]
        console.print(f"{where_s}  [red]INVALID[/]  {doc['key']}  {escape(reason)}")
        return
    summary = _encoder.encode(doc["data"]).decode()
    if len(summary) > 120:
        summary = summary[:117] + "..."
    summary = f"[red]dead-lettered[/] {escape(dlq.get('error', ''))}" if dlq else escape(summary)
    console.print(f"{where_s}  {doc['time'] or '-'}  [bold]{doc['type']}[/]  {doc['key']}  {summary}")
