"""Trace-driven cluster simulation: what a policy's decisions do to a cluster over days.

Jobs of a trace arrive, are planned round after round by a policy (``policies``), and run on a
simulated cluster whose progress and power come from a truth model kept apart from what the
policies see (``truth``). ``engine`` runs the rounds; ``metrics`` and ``outputs`` report them;
``dsfro simulate`` (``cli``) is the command. ``docs/simulation.md`` documents the formats.
"""
