"""``python -m solver.offline.calibration [options]``: the same as ``dsfro calibrate``."""

import sys

from solver.offline.calibration.cli import main

if __name__ == "__main__":
    sys.exit(main())
