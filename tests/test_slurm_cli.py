"""``dsfro-slurm``'s command line: flags and their environment variables, and a bad site file
refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.slurm.cli import build_parser, main


def test_flags_default_to_their_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSFRO_SLURM_BUDGET", "3")
    monkeypatch.setenv("DSFRO_SLURM_PARTITION", "gpu")
    monkeypatch.setenv("DSFRO_SERVER", "dsfro.internal:50051")
    args = build_parser().parse_args([])
    assert (args.budget, args.partition, args.server) == (3.0, "gpu", "dsfro.internal:50051")
    assert (args.fallback_after, args.checkpoint_grace, args.interval) == (300.0, 0.0, 30.0)
    assert build_parser().parse_args(["--budget", "7"]).budget == 7.0  # the flag wins


def test_a_negative_duration_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["--fallback-after", "-1"])
    assert e.value.code == 2
    assert "--fallback-after: must be >= 0" in capsys.readouterr().err


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
