"""``python -m agent.launcher`` is ``myolo-agent-launcher``."""

import sys

from agent.launcher.cli import main

sys.exit(main())
