"""Start the DSFRO gRPC service: ``python server.py [--host H] [--port P] ...``.

Flags override the DSFRO_* environment variables; see ``python server.py --help``.
"""

from __future__ import annotations

import sys

from solver.service.server import main

if __name__ == "__main__":
    sys.exit(main())
