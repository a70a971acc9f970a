"""The server's settings: flags, each overriding its DSFRO_* environment variable, checked
into one ServerConfig (a bad value is a ConfigError naming the flag or variable)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from solver import extras
from solver.app.limits import MAX_MESSAGE_BYTES, Limits
from solver.app.profile import Profile, ProfileError, load_profile, solver_settings
from solver.core.settings import SettingsError, SolverSettings
from solver.runtime.executors import RAY_ADDRESS_ENV
from solver.service import tracing
from solver.service.security import CredentialError, TlsFiles, TokenSource, load_tls


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 50051
    max_concurrent_solves: int = 2
    """Solves at once, one solve worker process each (a warm pool of as many, and a spare)."""
    max_queued_solves: int = 2
    """Solves that may wait for a slot; more are refused at once."""
    queue_wait_share: float = 0.25
    """Longest wait for a slot, as a share of the call's time budget (the wait is spent from
    its budget: it counts from the call's arrival)."""
    max_message_bytes: int = MAX_MESSAGE_BYTES
    limits: Limits = field(default_factory=Limits)
    solver_settings: SolverSettings = field(default_factory=SolverSettings)
    """Timing and size knobs of the solver (the profile's [tuning] table, DSFRO_TUNING_*)."""
    log_level: str = "INFO"
    log_format: str = "text"
    """How the server and its solve workers log (set once logging is configured)."""
    grpc_workers: int = 16
    """RPC threads; more than max_concurrent_solves so other calls are served during solves."""
    grace_period_seconds: float = 10.0
    ray_address: str | None = None
    """Decomposed solves run their sub-problems on this Ray cluster; None: local processes."""
    profile: Profile | None = None
    """Operator weights and solver settings that fill what a request leaves unset."""
    metrics_port: int | None = None
    """Serve Prometheus metrics at http://host:metrics_port/metrics (0: any free port);
    None: no metrics endpoint."""
    reflection: bool = True
    """Serve gRPC server reflection (grpcurl and similar discover the API); off, a caller
    needs the proto."""
    tls: TlsFiles | None = None
    """Serve TLS with these files (mutual TLS when a client CA is set); None: plaintext."""
    allowed_clients: frozenset[str] = frozenset()
    """Under mutual TLS, the client certificate names (common name or DNS name) that may call;
    empty: any certificate the client CA signed."""
    token: str | None = None
    """A bearer token callers must send (DSFRO_TOKEN; never a flag, argv is public)."""
    token_file: Path | None = None
    """A file of bearer tokens, one per line, re-read when it changes."""
    stuck_after_seconds: float = 30.0
    """A solve this long past its due time is stuck: health turns NOT_SERVING for the
    service (readiness) until it ends."""
    worker_memory_bytes: int | None = None
    """Resident memory a solver worker process may use; over it, the worker is killed and the
    solve answers with the plan it has. None: no limit."""
    tracing: bool = False
    """Export OpenTelemetry spans over OTLP (the OTEL_EXPORTER_OTLP_* variables say where);
    needs the otel extra."""
    health_port: int | None = None
    """Also serve grpc.health.v1 alone, in plaintext, on this port (0: any free one), on its
    own threads: for probes that speak neither TLS nor tokens, and that no load can starve."""

    @property
    def authenticates(self) -> bool:
        return self.token is not None or self.token_file is not None


class ConfigError(ValueError):
    """A bad server setting; the message names the flag or environment variable."""


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's flags; each overrides its environment variable."""
    parser.add_argument("--host", help="address to listen on (DSFRO_HOST; 127.0.0.1)")
    parser.add_argument("--port", help="port, 0 for any free one (DSFRO_PORT; 50051)")
    parser.add_argument(
        "--max-concurrent-solves",
        help="solves at once; more get RESOURCE_EXHAUSTED (DSFRO_MAX_CONCURRENT_SOLVES; 2)",
    )
    parser.add_argument(
        "--max-message-bytes", help="largest request/response (DSFRO_MAX_MESSAGE_BYTES; 256 MiB)"
    )
    parser.add_argument(
        "--max-time-budget-seconds",
        help="largest time budget accepted (DSFRO_MAX_TIME_BUDGET_SECONDS; 300)",
    )
    parser.add_argument(
        "--max-queued-solves",
        help="solves that may wait for a slot; more are refused at once "
        "(DSFRO_MAX_QUEUED_SOLVES; 2)",
    )
    parser.add_argument(
        "--queue-wait-share",
        help="longest wait for a slot, as a share of the call's budget, spent from it "
        "(DSFRO_QUEUE_WAIT_SHARE; 0.25)",
    )
    parser.add_argument("--workers", help="gRPC worker threads (DSFRO_WORKERS; 16)")
    parser.add_argument(
        "--grace-period-seconds", help="shutdown grace period (DSFRO_GRACE_PERIOD_SECONDS; 10)"
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (INFO)")
    parser.add_argument(
        "--log-format",
        help="text, or json: one object per line with the call's request id (DSFRO_LOG_FORMAT; "
        "text)",
    )
    parser.add_argument(
        "--reflection", help="serve gRPC reflection: on or off (DSFRO_REFLECTION; on)"
    )
    parser.add_argument(
        "--metrics-port",
        help="serve Prometheus metrics on this port at /metrics (DSFRO_METRICS_PORT; none)",
    )
    parser.add_argument(
        "--worker-memory-mib",
        help="resident memory a solver worker process may use; over it the worker is killed "
        "and replaced, and its solve answers with the plan it has (DSFRO_WORKER_MEMORY_MIB; "
        "no limit)",
    )
    parser.add_argument(
        "--tracing",
        help="OpenTelemetry spans over OTLP, on or off; OTEL_EXPORTER_OTLP_ENDPOINT says where "
        "(DSFRO_TRACING; off; needs pip install 'dsfro[otel]')",
    )
    parser.add_argument(
        "--health-port",
        help="also serve only grpc.health.v1, in plaintext, on this port (DSFRO_HEALTH_PORT; none)",
    )
    parser.add_argument(
        "--tls-cert", metavar="FILE", help="TLS certificate chain, PEM (DSFRO_TLS_CERT)"
    )
    parser.add_argument("--tls-key", metavar="FILE", help="TLS private key, PEM (DSFRO_TLS_KEY)")
    parser.add_argument(
        "--tls-client-ca",
        metavar="FILE",
        help="require client certificates signed by this CA: mutual TLS (DSFRO_TLS_CLIENT_CA)",
    )
    parser.add_argument(
        "--tls-allowed-clients",
        metavar="NAMES",
        help="comma-separated client certificate names (CN or DNS name) that may call; others "
        "get PERMISSION_DENIED (DSFRO_TLS_ALLOWED_CLIENTS; any the CA signed)",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="bearer tokens callers must send, one per line, re-read on change "
        "(DSFRO_TOKEN_FILE; or the token itself in DSFRO_TOKEN)",
    )
    parser.add_argument(
        "--ray-address",
        help="Ray cluster for decomposed solves (DSFRO_RAY_ADDRESS; none: local processes)",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="TOML profile of weights and solver settings for requests that leave them unset "
        "(DSFRO_PROFILE)",
    )


def _setting(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    attr: str,
    env: str | None,
) -> tuple[str, str] | None:
    """(value, where it came from) of one setting: the flag wins over the environment."""
    flag = getattr(args, attr, None)
    if flag is not None:
        return str(flag), "--" + attr.replace("_", "-")
    if env is not None and env in environ:
        return environ[env], env
    return None


def _int(value: tuple[str, str], low: int, high: int) -> int:
    raw, where = value
    try:
        n = int(raw)
    except ValueError:
        n = low - 1
    if not low <= n <= high:
        raise ConfigError(f"{where} must be an integer in [{low}, {high}], got {raw!r}")
    return n


_SWITCH = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


def _switch(value: tuple[str, str]) -> bool:
    raw, where = value
    try:
        return _SWITCH[raw.strip().lower()]
    except KeyError:
        raise ConfigError(f"{where} must be on or off, got {raw!r}") from None


def _share(value: tuple[str, str]) -> float:
    raw, where = value
    try:
        x = float(raw)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and 0 <= x <= 1):
        raise ConfigError(f"{where} must be a number in [0, 1], got {raw!r}")
    return x


def _seconds(value: tuple[str, str]) -> float:
    raw, where = value
    try:
        x = float(raw)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise ConfigError(f"{where} must be a positive number of seconds, got {raw!r}")
    return x


def config_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> ServerConfig:
    """The server configuration from flags (see add_server_arguments) and environment."""
    env: Mapping[str, str] = environ if environ is not None else {}
    c = ServerConfig()
    if (v := _setting(args, env, "host", "DSFRO_HOST")) is not None:
        if not v[0]:
            raise ConfigError(f"{v[1]} must not be empty")
        c = replace(c, host=v[0])
    if (v := _setting(args, env, "port", "DSFRO_PORT")) is not None:
        c = replace(c, port=_int(v, 0, 65535))
    v = _setting(args, env, "max_concurrent_solves", "DSFRO_MAX_CONCURRENT_SOLVES")
    if v is not None:
        c = replace(c, max_concurrent_solves=_int(v, 1, 1024))
    if (v := _setting(args, env, "max_queued_solves", "DSFRO_MAX_QUEUED_SOLVES")) is not None:
        c = replace(c, max_queued_solves=_int(v, 0, 4096))
    if (v := _setting(args, env, "queue_wait_share", "DSFRO_QUEUE_WAIT_SHARE")) is not None:
        c = replace(c, queue_wait_share=_share(v))
    if (v := _setting(args, env, "max_message_bytes", "DSFRO_MAX_MESSAGE_BYTES")) is not None:
        c = replace(c, max_message_bytes=_int(v, 4 * 1024 * 1024, 2**31 - 1))
    v = _setting(args, env, "max_time_budget_seconds", "DSFRO_MAX_TIME_BUDGET_SECONDS")
    if v is not None:
        top = _seconds(v)
        default = min(c.limits.default_time_budget_seconds, top)
        c = replace(
            c,
            limits=replace(
                c.limits, max_time_budget_seconds=top, default_time_budget_seconds=default
            ),
        )
    if (v := _setting(args, env, "profile", "DSFRO_PROFILE")) is not None:
        try:
            c = replace(c, profile=load_profile(v[0]))
        except ProfileError as e:
            raise ConfigError(f"{v[1]}: {e}") from e
    try:
        c = replace(c, solver_settings=solver_settings(c.profile, env))
    except SettingsError as e:
        raise ConfigError(str(e)) from e
    if (v := _setting(args, env, "metrics_port", "DSFRO_METRICS_PORT")) is not None:
        c = replace(c, metrics_port=_int(v, 0, 65535))
    if (v := _setting(args, env, "reflection", "DSFRO_REFLECTION")) is not None:
        c = replace(c, reflection=_switch(v))
    if (v := _setting(args, env, "health_port", "DSFRO_HEALTH_PORT")) is not None:
        c = replace(c, health_port=_int(v, 0, 65535))
    if (v := _setting(args, env, "worker_memory_mib", "DSFRO_WORKER_MEMORY_MIB")) is not None:
        c = replace(c, worker_memory_bytes=_int(v, 64, 2**30) * 2**20)
    if (v := _setting(args, env, "tracing", "DSFRO_TRACING")) is not None:
        c = replace(c, tracing=_switch(v))
        if c.tracing and not tracing.available():
            raise ConfigError(
                f"{v[1]} needs OpenTelemetry, which is not installed: pip install 'dsfro[otel]'"
            )
    c = _with_security(c, args, env)
    if (v := _setting(args, env, "ray_address", RAY_ADDRESS_ENV)) is not None:
        c = replace(c, ray_address=v[0] or None)
        if c.ray_address and not extras.available("ray"):
            raise ConfigError(f"{v[1]} needs ray, which is not installed: pip install 'dsfro[ray]'")
    if (v := _setting(args, env, "grace_period_seconds", "DSFRO_GRACE_PERIOD_SECONDS")) is not None:
        c = replace(c, grace_period_seconds=_seconds(v))
    workers = _setting(args, env, "workers", "DSFRO_WORKERS")
    low = c.max_concurrent_solves + c.max_queued_solves + 2
    if workers is not None:
        c = replace(c, grpc_workers=_int(workers, low, 4096))
    elif c.grpc_workers < low:
        c = replace(c, grpc_workers=low + 8)
    _distinct_ports(c)
    return c


def _distinct_ports(c: ServerConfig) -> None:
    """The health and metrics ports differ from the service's and from each other (0: any)."""
    taken = {"DSFRO_PORT": c.port}
    others = (("DSFRO_HEALTH_PORT", c.health_port), ("DSFRO_METRICS_PORT", c.metrics_port))
    for name, port in others:
        if not port:
            continue
        same = [other for other, p in taken.items() if p == port]
        if same:
            raise ConfigError(f"{name}: {port} is already {same[0]}'s port")
        taken[name] = port


def _path(value: tuple[str, str]) -> Path:
    raw, where = value
    if not raw:
        raise ConfigError(f"{where} must not be empty")
    return Path(raw)


def _with_security(
    c: ServerConfig, args: argparse.Namespace, env: Mapping[str, str]
) -> ServerConfig:
    """TLS files, allowed client names and tokens, each checked now: a server that starts has
    credentials that load."""
    cert = _setting(args, env, "tls_cert", "DSFRO_TLS_CERT")
    key = _setting(args, env, "tls_key", "DSFRO_TLS_KEY")
    client_ca = _setting(args, env, "tls_client_ca", "DSFRO_TLS_CLIENT_CA")
    allowed = _setting(args, env, "tls_allowed_clients", "DSFRO_TLS_ALLOWED_CLIENTS")
    if (cert is None) != (key is None):
        given, missing = (cert, "--tls-key") if key is None else (key, "--tls-cert")
        assert given is not None
        raise ConfigError(f"{given[1]} needs {missing} (or its environment variable) too")
    if cert is not None and key is not None:
        files = TlsFiles(
            _path(cert), _path(key), _path(client_ca) if client_ca is not None else None
        )
        try:
            load_tls(files)
        except CredentialError as e:
            raise ConfigError(str(e)) from e
        c = replace(c, tls=files)
    elif client_ca is not None:
        raise ConfigError(f"{client_ca[1]} needs --tls-cert and --tls-key")
    if allowed is not None:
        names = frozenset(n.strip() for n in allowed[0].split(",") if n.strip())
        if not names:
            raise ConfigError(f"{allowed[1]} must name at least one client")
        if c.tls is None or c.tls.client_ca is None:
            raise ConfigError(f"{allowed[1]} needs mutual TLS (--tls-client-ca)")
        c = replace(c, allowed_clients=names)
    token = env.get("DSFRO_TOKEN")
    token_file = _setting(args, env, "token_file", "DSFRO_TOKEN_FILE")
    path = _path(token_file) if token_file is not None else None
    try:
        TokenSource(token, path)  # loads now, so that a bad token or file stops the start
    except CredentialError as e:
        raise ConfigError(str(e)) from e
    return replace(c, token=token, token_file=path)
