"""The op backends, one module each. Each exposes BACKEND: a `kernels.ops.backends.base.Backend`."""
