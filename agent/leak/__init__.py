"""Memory-leak detection: robust growth of GPU, per-process and host-RSS memory in % of capacity per hour.

``estimate`` (Theil-Sen with a Kendall interval), ``series`` (warm-up, floor, window, alert), ``detector``
(one series per GPU/process/RSS, reports and faults), ``synthetic`` (realistic test series), ``rss``.
"""
