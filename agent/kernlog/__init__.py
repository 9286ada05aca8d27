"""XIDs from the kernel log (``NVRM: Xid`` lines of /dev/kmsg or the journal), for when NVML's events say nothing."""
