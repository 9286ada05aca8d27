"""RDMA latency between two nodes with perftest's ``ib_write_lat``, for pre-flight."""
