"""``dsfro-slurm``'s command line: flags and their environment variables, and a bad site file
refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.slurm.cli import build_parser, main, parse_args


def test_flags_default_to_their_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSFRO_SLURM_BUDGET", "3")
    monkeypatch.setenv("DSFRO_SLURM_PARTITION", "gpu")
    monkeypatch.setenv("DSFRO_SERVER", "dsfro.internal:50051")
    args = build_parser().parse_args([])
    assert (args.budget, args.partition, args.server) == (3.0, "gpu", "dsfro.internal:50051")
    assert (args.fallback_after, args.checkpoint_grace, args.interval) == (300.0, 0.0, 30.0)
    assert build_parser().parse_args(["--budget", "7"]).budget == 7.0  # the flag wins


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--fallback-after", "-1", "must be a number of seconds >= 0, got '-1'"),
        ("--budget", "0", "must be a number of seconds > 0"),
        ("--budget", "inf", "must be a number of seconds > 0, got 'inf'"),
        ("--interval", "nan", "must be a number of seconds >= 0, got 'nan'"),
        ("--poll", "0.1", "must be a number of seconds >= 1"),
        ("--slurm-timeout", "0", "must be a number of seconds > 0"),
        ("--apply-workers", "0", "must be >= 1, got '0'"),
        ("--metrics-port", "70000", "must be >= 1 and <= 65535"),
        ("--log-level", "loud", "expected one of DEBUG, INFO"),
    ],
)
def test_a_value_the_adapter_cannot_run_with_is_refused(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, expected: str
) -> None:
    """nan and inf passed as seconds; 0 workers, a 0 s Slurm timeout, a level logging does not
    know were tracebacks or rounds that could never work; a poll of 0 s called slurmctld in a
    loop."""
    with pytest.raises(SystemExit) as e:
        parse_args([flag, value])
    assert e.value.code == 2
    assert f"argument {flag}: {expected}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("DSFRO_SLURM_BUDGET", "abc", "expected seconds, got 'abc'"),
        ("DSFRO_SLURM_APPLY_WORKERS", "x", "expected a whole number, got 'x'"),
        ("DSFRO_SLURM_LOG_LEVEL", "loud", "expected one of DEBUG"),
        ("DSFRO_SLURM_LOG_FORMAT", "xml", "expected one of json, text, got 'xml'"),
        ("DSFRO_SLURM_EVACUATE_DRAINED", "maybe", "expected one of 1, true"),
    ],
)
def test_a_bad_environment_variable_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    expected: str,
) -> None:
    """DSFRO_SLURM_BUDGET=abc and DSFRO_SLURM_APPLY_WORKERS=x were tracebacks."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as e:
        main(["--once"])
    assert e.value.code == 2
    assert f"dsfro-slurm: error: {variable}: {expected}" in capsys.readouterr().err


def test_switches_and_every_flag_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """DSFRO_SLURM_EVACUATE_DRAINED=false turned the evacuation on; the seed and TLS flags had
    no variable."""
    monkeypatch.setenv("DSFRO_SLURM_EVACUATE_DRAINED", "false")
    monkeypatch.setenv("DSFRO_SLURM_TLS", "yes")
    monkeypatch.setenv("DSFRO_SLURM_SEED", "7")
    monkeypatch.setenv("DSFRO_SLURM_TOKEN_FILE", "/run/secrets/dsfro-token")
    args = parse_args([])
    assert (args.evacuate_drained, args.tls, args.seed) == (False, True, 7)
    assert str(args.token_file) == "/run/secrets/dsfro-token"
    monkeypatch.setenv("DSFRO_SLURM_EVACUATE_DRAINED", "1")
    assert parse_args([]).evacuate_drained is True


def test_a_bad_site_file_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site.json"
    site.write_text('{"power_budget_watts": -5}')
    assert main(["--site", str(site), "--dry-run"]) == 2
    assert f"{site}.power_budget_watts: must be > 0" in capsys.readouterr().err


def test_a_plan_dir_that_cannot_be_made_exits_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was a NotADirectoryError traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = main(["--server", "127.0.0.1:1", "--plan-dir", str(blocker / "plans"), "--once"])
    assert code == 2
    assert (
        capsys.readouterr().err == f"dsfro-slurm: --plan-dir {blocker / 'plans'}: Not a directory\n"
    )


def test_a_metrics_port_held_by_another_process_exits_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It was an "Address already in use" traceback."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        code = main(
            ["--server", "127.0.0.1:1", "--metrics-port", str(port), "--metrics-host", "127.0.0.1"]
        )
    assert code == 2
    assert capsys.readouterr().err == (
        f"dsfro-slurm: --metrics-port: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    )
