"""``myoloctl node enroll|keys|revoke``: which key each node signs its faults, acks and training events with;
``myoloctl node set-interval``: how often its agent samples.

A node's agent makes its Ed25519 key at its first start (``<data_dir>/node.key``, the public half beside it as
``node.key.pub``; ``myolo-agent key show`` prints it). Until that public key is enrolled here, the coordinators
dead-letter the node's events that cause action (faults, command acks, training faults and completions);
after a revocation, again. These routes are an admin's; a standby redirects the writes to the leader.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console

from myolo.common.errors import ConfigError
from myolo.common.keys import MAX_KEY_FILE_BYTES, public_key_from_pem
from myolo.coordinator.cli import render
from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.exits import fail
from myolo.coordinator.cli.output import Output, OutputOption, data

PUBLIC_KEY = "node.key.pub"  # the agent writes its public key there, beside its private node.key

app = typer.Typer(
    help="Node identity: enrol the public key a node signs its faults, acks and training events with; list "
    "the enrolled keys; revoke one. And set how often a node's agent samples.",
    no_args_is_help=True,
)
NodeArg = Annotated[str, typer.Argument(help="Node id, as the agent's node_id and `myoloctl get nodes` name it.")]


def _read_key(source: str) -> str:
    """The PEM from a file or ``-`` (stdin), checked here so a wrong file fails before anything is sent."""
    try:
        text = sys.stdin.read(MAX_KEY_FILE_BYTES + 1) if source == "-" else Path(source).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--public-key {source}: cannot read it: {exc}")
    try:
        public_key_from_pem(text, "--public-key")
    except ConfigError as exc:
        fail(f"--public-key {source}: {exc.reason} (give the node's {PUBLIC_KEY}, never its private node.key)")
    return text


@app.command()
def enroll(
    node: NodeArg,
    public_key: Annotated[
        str,
        typer.Option(
            "--public-key",
            "-k",
            help=f"The node's public key, PEM: its <data_dir>/{PUBLIC_KEY} (`myolo-agent key show` prints it), "
            "or - to read it from stdin.",
        ),
    ],
    api: ApiOption = None,
) -> None:
    """Enrol NODE's public key: from now on its faults, acks and training events are accepted when signed with
    it (and refused otherwise). Enrolling a different key replaces the old one."""
    pem = _read_key(public_key)
    client = ApiClient.from_option(api)
    answer = client.enroll(node, pem)
    out = Console(soft_wrap=True, highlight=False)
    out.print(f"node/{answer.node_id} key [bold]{answer.change}[/]: key id {answer.key_id}")
    out.print(f"recorded by {answer.by} (epoch {answer.epoch}) via {client.last_url}", style="dim")


@app.command()
def revoke(node: NodeArg, api: ApiOption = None) -> None:
    """Revoke NODE's key: its faults, acks and training events are refused until a key is enrolled again."""
    client = ApiClient.from_option(api)
    answer = client.revoke_key(node)
    out = Console(soft_wrap=True, highlight=False)
    out.print(f"node/{answer.node_id} key {answer.key_id} [bold]revoked[/] by {answer.revoked_by}")
    out.print(f"via {client.last_url}", style="dim")


@app.command()
def keys(output: OutputOption = Output.table, api: ApiOption = None) -> None:
    """Every enrolled node key (revoked ones too): node, key id, state, when and by whom."""
    body = data(ApiClient.from_option(api).node_keys())
    out = Console(soft_wrap=True, highlight=False)
    if output is Output.json:
        out.print_json(json.dumps(body))
    elif output is Output.yaml:
        out.print(yaml.safe_dump(body, sort_keys=False), end="")
    else:
        rows = [
            [
                k["node_id"],
                k["key_id"],
                render.styled("revoked", "red") if k.get("revoked") else render.styled("active", "green"),
                k.get("revoked_by") or k["by"],
            ]
            for k in body["items"]
        ]
        render.table(out, ["NODE", "KEY ID", "STATE", "BY"], rows)


@app.command("set-interval")
def set_interval(
    node: NodeArg,
    seconds: Annotated[float, typer.Argument(help="Seconds between the agent's samples, 0.05 to 3600.")],
    api: ApiOption = None,
) -> None:
    """Set how often NODE's agent samples its GPUs: a signed ``set_interval`` command through the leader (an
    operator's). It lasts until the agent restarts or is told otherwise; ``GET /v1/commands?node=`` shows its ack."""
    client = ApiClient.from_option(api)
    sent = client.set_interval(node, seconds)
    out = Console(soft_wrap=True, highlight=False)
    out.print(f"node/{sent.node_id} sample interval [bold]{sent.interval_s:g} s[/] sent as command {sent.command_id}")
    out.print(f"via {client.last_url}", style="dim")
