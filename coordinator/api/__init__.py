"""The coordinator's HTTP API: the core's routes and every component's, one OpenAPI document for all."""
