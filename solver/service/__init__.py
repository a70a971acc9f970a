"""The gRPC edge: the server, its servicer, configuration, security, logs, metrics, tracing
and reflection."""
