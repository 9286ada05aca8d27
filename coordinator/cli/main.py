"""`myoloctl`: the operator's command line for Myolotrain (local stack, events; fleet commands come next)."""

from __future__ import annotations

import typer

from coordinator.cli import cordon, describe, events_cmd, get, local

app = typer.Typer(
    name="myoloctl",
    help="Operate a Myolotrain v4 cluster: run the local stack, produce and inspect events.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(local.app, name="local")
app.add_typer(events_cmd.app, name="events")
app.add_typer(get.app, name="get")
app.add_typer(describe.app, name="describe")
app.command()(cordon.cordon)
app.command()(cordon.uncordon)


if __name__ == "__main__":
    app()
