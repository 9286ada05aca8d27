"""Blue-green releases of the agent and the trainer on the node (the ``upgrade`` and ``rollback`` commands).

Each version of a component is installed beside the others (``<dir>/<component>/<version>``, a verified wheel
installed with pip ``--target``); ``current`` is a symlink to the version in use and ``previous`` to the one
before it, both replaced atomically, so a rollback is one link away. Nothing here imports the daemon: the
daemon's glue is ``myolo.agent.daemon.releases``.
"""

from myolo.agent.releases.config import ReleasesConfig
from myolo.agent.releases.errors import ReleaseError
from myolo.agent.releases.restart import EXIT_RESTART, RestartPlan
from myolo.agent.releases.store import ReleaseInfo, ReleaseStore

__all__ = ["EXIT_RESTART", "ReleaseError", "ReleaseInfo", "ReleaseStore", "ReleasesConfig", "RestartPlan"]
