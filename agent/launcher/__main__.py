"""``python -m myolo.agent.launcher`` is ``myolo-agent-launcher``."""

import sys

from myolo.agent.launcher.cli import main

sys.exit(main())
