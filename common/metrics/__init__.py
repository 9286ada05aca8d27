"""Metric names: the mapping between Prometheus (dcgm-exporter's names and ours) and OpenTelemetry, the
Prometheus text renderer both daemons serve, and the PromQL / Grafana translator."""
