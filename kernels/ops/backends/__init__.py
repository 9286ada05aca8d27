"""The op backends, one module each. Each exposes BACKEND: a `myolo.kernels.ops.backends.base.Backend`."""
