"""The doors: request validation and protobuf conversion, settings, the one solve pipeline,
the gRPC service and the command line."""
