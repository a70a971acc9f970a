"""Helpers shared by the script packages (``scripts.fuzz``, ``scripts.reliability``)."""
