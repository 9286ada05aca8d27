"""The mode of the manifest an export writes: ``atomic_write``'s temporary file is 0o600, yet the manifest,
like the weights beside it, is meant for other readers (a registry, a server) as the umask allows."""

from __future__ import annotations


def file_mode() -> int:
    """0o666 less the process's umask, read from /proc: ``os.umask`` can only be read by setting it, which races
    other threads creating files (the checkpoint writers). 0o600 where it cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o600
