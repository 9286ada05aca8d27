"""The agent daemon: its state (``runtime``), assembly (``assemble``), loops, command actions, lifecycle
(``main``: signals, clean stop; ``reload``: SIGHUP), health report (``status``)."""
