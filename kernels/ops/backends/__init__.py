"""The op backends, one module each. Each exposes BACKEND: a `kernels.ops.registry.Backend`."""
