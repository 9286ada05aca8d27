"""The agent daemon: runtime assembly, loops, lifecycle (signals, reload), health report."""
