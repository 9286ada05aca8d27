"""``python -m myolo.agent`` is ``myolo-agent`` (handy before the console script is installed)."""

from myolo.agent.cli import app

app()
