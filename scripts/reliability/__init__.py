"""Load and fault benchmark of the gRPC service: the server runs as a separate process.

Run it from the repository root as ``.venv/bin/python -m scripts.reliability``;
``scripts.reliability.cli`` describes the scenarios.
"""
