"""Backups of a cluster's durable state: the compacted ``myolo.state.*`` topics, the configs and the checkpoint
manifests, in one ``.tar.gz`` that ``myoloctl restore`` verifies before it writes anything.

Not a coordinator component: a library the CLI (``coordinator/cli/backup.py``) uses. ``schema`` is the archive's
data (manifest, records), ``archive`` writes and reads it with bounds, ``state_read`` reads topics to their end,
``files`` collects configs and checkpoint manifests, ``make`` builds a backup, ``restore`` writes one back.
"""
