"""``python -m tests.soak``: see ``tests/soak/run.py``."""

import sys

from tests.soak.run import main

sys.exit(main())
