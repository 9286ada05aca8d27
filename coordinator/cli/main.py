"""`myoloctl`: the operator's command line for Myolotrain (local stack, events, the fleet, elastic jobs)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from myolo.coordinator.cli import (
    auth,
    backup,
    cordon,
    describe,
    drift,
    events_cmd,
    exits,
    get,
    jobs,
    keys,
    local,
    metrics,
    node,
    plan,
    preflight,
    profile,
    quantize,
    registry,
    rollout,
    token,
    train,
    watermark,
)
from myolo.coordinator.core.errors import Refusal


class Myoloctl(TyperGroup):
    """The typer boundary: every command's ``CliError`` or ``Refusal`` is printed and exits with its code here."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (exits.CliError, Refusal) as exc:
            raise exits.exit_for(exc) from None


app = typer.Typer(
    name="myoloctl",
    cls=Myoloctl,
    help="Operate a Myolotrain v4 cluster: run the local stack, inspect the fleet and its events, run elastic "
    "training jobs (apply -f job.yaml, get jobs, describe job, scale, logs, delete), watch production drift "
    "(drift status), keep model versions (registry) and upgrade the fleet in waves (rollout).\n\n" + exits.HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _options(
    ca_file: Annotated[
        str | None,
        typer.Option(
            "--ca-file",
            envvar="MYOLO_CA_FILE",
            help="CA certificate (PEM) to trust for an https coordinator API (default: ~/.config/myolo/ca.pem if "
            "present, else the system's). The API token comes from MYOLO_TOKEN or ~/.config/myolo/token.",
            show_default=False,
        ),
    ] = None,
) -> None:
    auth.options["ca_file"] = ca_file


app.add_typer(local.app, name="local")
app.add_typer(events_cmd.app, name="events")
app.add_typer(get.app, name="get")
app.add_typer(describe.app, name="describe")
app.command()(cordon.cordon)
app.command()(cordon.uncordon)
app.command()(jobs.apply)
app.command()(train.train)
app.add_typer(jobs.scale_app, name="scale")
app.add_typer(jobs.logs_app, name="logs")
app.add_typer(jobs.delete_app, name="delete")
app.add_typer(keys.app, name="keys")
app.add_typer(token.app, name="token")
app.add_typer(node.app, name="node")
registry.app.command("quantize")(quantize.quantize)
registry.app.command("quantizations")(quantize.quantizations)
registry.app.command("verify-watermark")(watermark.verify_watermark)
app.add_typer(registry.app, name="registry")
app.add_typer(drift.app, name="drift")
app.command()(backup.backup)
app.command()(backup.restore)
app.add_typer(rollout.app, name="rollout")
app.add_typer(plan.app, name="plan")
app.add_typer(metrics.app, name="metrics")
app.add_typer(profile.app, name="profile")
app.command(help=preflight.HELP)(preflight.preflight)


if __name__ == "__main__":
    app()
