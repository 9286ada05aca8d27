"""sd_notify: READY, WATCHDOG, STATUS and STOPPING for systemd's Type=notify services."""

from myolo.agent.notify.notify import Notifier

__all__ = ["Notifier"]
