"""``python -m solver.generate``: the generator's command line (``solver.generate.cli``)."""

import sys

from solver.generate.cli import main

if __name__ == "__main__":
    sys.exit(main())
