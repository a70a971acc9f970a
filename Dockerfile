# syntax=docker/dockerfile:1
# The DSFRO gRPC service. Two stages: `build` makes the dsfro wheel and the wheels of its pinned
# dependencies; the runtime installs only those wheels (no compiler, no sources, no pip cache)
# and runs as a numeric non-root user on a filesystem it never writes to (/tmp aside).
#
#   docker build -t dsfro:0.x .
#   docker run --rm -p 50051:50051 -p 50052:50052 -p 9090:9090 --read-only --tmpfs /tmp dsfro:0.x
#
# Settings are DSFRO_* variables or flags after the image name (`dsfro serve --help`);
# docs/operations.md covers TLS, tokens, sizing and probes.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY . .
# The dsfro wheel (built in an isolated environment with the pinned build backend) and every
# dependency as a wheel, so the runtime stage installs offline from /wheels.
RUN pip wheel --wheel-dir /wheels ".[server]" \
    && ls /wheels/dsfro-*.whl

FROM ${PYTHON_IMAGE} AS runtime
ARG UID=10001
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/dsfro \
    PATH=/opt/dsfro/bin:$PATH \
    HOME=/tmp
# The wheels are bind-mounted from the build stage, not copied: no layer keeps them.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/dsfro \
    && /opt/dsfro/bin/pip install --no-index --find-links /wheels "dsfro[server]" \
    && groupadd --system --gid ${UID} dsfro \
    && useradd --system --uid ${UID} --gid ${UID} --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin dsfro \
    && dsfro --version

# Listen beyond loopback (the container's network is the boundary; see docs/operations.md for
# TLS and tokens), health on its own plaintext port for probes, metrics for Prometheus, JSON
# logs, and no reflection: a caller needs the proto.
ENV DSFRO_HOST=0.0.0.0 \
    DSFRO_PORT=50051 \
    DSFRO_HEALTH_PORT=50052 \
    DSFRO_METRICS_PORT=9090 \
    DSFRO_LOG_FORMAT=json \
    DSFRO_REFLECTION=off

# gRPC API; grpc.health.v1 only, plaintext; Prometheus /metrics, plaintext.
EXPOSE 50051 50052 9090

WORKDIR /tmp
USER ${UID}:${UID}

# The plaintext health port answers whether or not the main port uses TLS; without a health
# port the probe falls back to the main port.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD dsfro health --server "127.0.0.1:${DSFRO_HEALTH_PORT:-${DSFRO_PORT:-50051}}" || exit 1

STOPSIGNAL SIGTERM
ENTRYPOINT ["dsfro", "serve"]
