"""``python -m solver.slurm``: the same as the ``dsfro-slurm`` command."""

import sys

from solver.slurm.cli import main

sys.exit(main())
