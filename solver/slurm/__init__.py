"""The Slurm adapter (``dsfro-slurm``): Slurm jobs that carry a DSFRO demand are planned by a
DSFRO service and placed as the plan says.

Each round reads Slurm (``sinfo``/``squeue --json``), builds a snapshot of the nodes and of
the held jobs' demands (solver.slurm.snapshot), calls Solve through ``solver.client``, turns
the plan into one decision per job (solver.slurm.decide) and applies them with ``scontrol``
(solver.slurm.apply). The adapter's state is in Slurm (solver.slurm.record). It imports only
the client, the wire types and the standard library (plus prometheus-client, the ``slurm``
extra): it runs beside Slurm with ``pip install 'dsfro[slurm]'``, without the solver.
docs/integrations.md is the user's guide.
"""

import os

# As the dsfro command (solver.cli): gRPC's C core at INFO would log a line for every failed
# TLS handshake beside the adapter's own event; GRPC_VERBOSITY, when set, wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
