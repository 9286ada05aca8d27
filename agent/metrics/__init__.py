"""``GET /metrics``: the agent's last sample and what it published, in dcgm-exporter's names and ours
(Prometheus text), and the same values as OpenTelemetry instruments; both from ``common/metrics/mapping.toml``."""
