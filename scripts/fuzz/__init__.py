"""Fuzzing benchmark of the gRPC service: a real server in its own process, N requests.

Run it from the repository root as ``.venv/bin/python -m scripts.fuzz``; ``scripts.fuzz.cli``
describes what it does.
"""
