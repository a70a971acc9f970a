"""The command-line edge: ``dsfro`` and its commands."""

import os

# gRPC's C core logs at INFO unless told (a line on stderr for every failed TLS handshake,
# before the command's own message); a user who wants them sets GRPC_VERBOSITY. Set before
# any command imports grpc.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
