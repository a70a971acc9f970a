"""``python -m solver.calibration [options]``: the same as ``dsfro calibrate``."""

import sys

from solver.calibration.cli import main

if __name__ == "__main__":
    sys.exit(main())
