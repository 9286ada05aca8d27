"""``python -m agent`` is ``myolo-agent`` (handy before the console script is installed)."""

from agent.cli import app

app()
