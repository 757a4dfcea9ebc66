"""Shared fixtures: the built `wattline` binary, a stand-in `nvidia-smi` in the real
CSV format, and the reference system (`nemo-relay`) when installed beside wattline."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]

# The same stand-in the Rust tests use (tests/support/mod.rs): one H200 at 250 W, and
# its loop mode for the power stream.
FAKE_NVIDIA_SMI = r"""#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H200 (UUID: GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c)";;
  *--loop-ms=*) while :; do echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, 250.00"; sleep 0.1; done;;
  *) echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, NVIDIA H200, 7, 3, 1377, 143771, 46, 250.00, 700.00, 1980, 3201, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0, 250.00";;
esac
"""


@pytest.fixture(scope="session")
def wattline_binary() -> pathlib.Path:
    """The CLI built by `cargo test` (scripts/test.sh runs it first)."""
    path = pathlib.Path(
        os.environ.get("WATTLINE_BINARY", REPOSITORY / "target" / "debug" / "wattline")
    )
    if not path.exists():
        pytest.fail(f"{path} does not exist: build it with `cargo build` (or set WATTLINE_BINARY)")
    return path


def _first_on_path(directory: pathlib.Path, script: str, monkeypatch) -> pathlib.Path:
    """`script` installed as `nvidia-smi` in `directory`, first on PATH, with GPU
    polls every 100 ms."""
    directory.mkdir()
    program = directory / "nvidia-smi"
    program.write_text(script)
    program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("GENAI_GPU_COLLECTION_INTERVAL", "0.1")
    return program


@pytest.fixture
def stand_in_nvidia_smi(tmp_path, monkeypatch) -> pathlib.Path:
    """`nvidia-smi` first on PATH, answering as a 250 W H200."""
    return _first_on_path(tmp_path / "bin", FAKE_NVIDIA_SMI, monkeypatch)


@pytest.fixture
def nvidia_smi_listing_the_command(tmp_path, monkeypatch) -> pathlib.Path:
    """`nvidia-smi` first on PATH: a 250 W H200 whose process query lists the command
    `wattline run` started as the one process on it, the stand-in the Rust tests use
    (gpu/tests/fixtures/fake-smi/lists_the_command.sh). Its folder, where it
    writes the pids it listed to `listed`."""
    source = REPOSITORY / "gpu" / "tests" / "fixtures" / "fake-smi" / "lists_the_command.sh"
    return _first_on_path(tmp_path / "listing-bin", source.read_text(), monkeypatch).parent


@pytest.fixture
def quiet_home(tmp_path, monkeypatch) -> pathlib.Path:
    """A home without the developer's plugins.toml or GENAI_* settings."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    for name in list(os.environ):
        if name.startswith("GENAI_") and name != "GENAI_GPU_COLLECTION_INTERVAL":
            monkeypatch.delenv(name)
    monkeypatch.delenv("WATTLINE_HOST_SOCKET", raising=False)
    return home


@pytest.fixture
def reference():
    """The reference system, installed in the same venv (scripts/test.sh)."""
    try:
        from nemo_relay import plugin, resource_metrics
    except ImportError:
        if os.environ.get("CI", "") not in ("", "0", "false") and "WATTLINE_SKIP_REFERENCE" in os.environ:
            pytest.fail("WATTLINE_SKIP_REFERENCE is set under CI: CI runs every test; unset WATTLINE_SKIP_REFERENCE")
        if os.environ.get("WATTLINE_SKIP_REFERENCE") == "1":
            pytest.skip("WATTLINE_SKIP_REFERENCE=1: the reference comparison is NOT run")
        pytest.fail("nemo-relay is not installed: run scripts/test.sh, or set WATTLINE_SKIP_REFERENCE=1")
    return plugin, resource_metrics
