"""``python -m solver.offline.generate``: the generator's command line
(``solver.offline.generate.cli``)."""

import sys

from solver.offline.generate.cli import main

if __name__ == "__main__":
    sys.exit(main())
