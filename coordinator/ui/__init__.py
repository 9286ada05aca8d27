"""The dashboard: a read-only web view of what this coordinator holds, served under ``/ui``."""
