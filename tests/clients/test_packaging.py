"""The adapters' client as it is published: ``python -m build`` of clients/python makes a wheel and
an sdist, and the wheel installs with its dependency into a clean virtualenv of the oldest Python
the package supports (3.10), where the ``exchange-client`` command runs.

The build works on a copy of clients/python in the test's temporary folder, so that nothing
(egg-info, build/) is written into the checkout. Run with -s to see the wheel's size.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.stack.conftest import ROOT

CLIENT = ROOT / "clients" / "python"
OLDEST_PYTHON = (3, 10)  # requires-python in clients/python/pyproject.toml
# httpx and its dependencies are all it brings; the wheel itself is a few modules.
WHEEL_SIZE_LIMIT = 64 * 1024


def runs_as(python: str, version: tuple[int, int]) -> bool:
    try:
        answer = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return False
    return answer.returncode == 0 and answer.stdout.split() == [str(part) for part in version]


def oldest_python() -> str:
    """A Python 3.10 that runs: ``python3.10`` on PATH, else pyenv's installed 3.10 (pyenv's
    shim answers only for the versions pyenv has selected), else this interpreter."""
    candidates = [shutil.which("python3.10")]
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/3.10*/bin/python3.10"), reverse=True)
    for candidate in candidates:
        if candidate and runs_as(candidate, OLDEST_PYTHON):
            return candidate
    return sys.executable


def run(*command: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


@pytest.mark.slow  # builds the wheel, makes a virtualenv and installs into it
def test_the_built_wheel_installs_into_a_clean_python_3_10_virtualenv_and_its_command_runs(
    tmp_path: Path,
) -> None:
    source = tmp_path / "source"
    shutil.copytree(
        CLIENT,
        source,
        ignore=shutil.ignore_patterns(
            "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache", "build", "dist"
        ),
    )
    dist = tmp_path / "dist"

    run(sys.executable, "-m", "build", "--outdir", dist, source)

    [wheel] = dist.glob("exchange_client-*-py3-none-any.whl")
    [sdist] = dist.glob("exchange_client-*.tar.gz")
    size = wheel.stat().st_size
    print(f"{wheel.name}: {size:,} bytes; {sdist.name}: {sdist.stat().st_size:,} bytes")  # noqa: T201
    assert size < WHEEL_SIZE_LIMIT, f"{wheel.name} is {size:,} bytes"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"{wheel.name.split('-py3')[0]}.dist-info/METADATA").decode()
    assert {"exchange_client/py.typed", "exchange_client/cli.py"} <= names, names
    assert "Requires-Python: >=3.10" in metadata.splitlines()

    python = oldest_python()
    venv = tmp_path / "venv"
    run(python, "-m", "venv", venv)
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel)

    version = run(venv / "bin" / "exchange-client", "--version")
    assert version == "exchange-client 0.1.0\n", f"wheel of {size:,} bytes"
    # The modules --version does not load import under this Python too.
    run(
        venv / "bin" / "python",
        "-c",
        "import exchange_client.consumer, exchange_client.stream_consumer",
    )
    interpreter = run(venv / "bin" / "python", "-c", "import sys; print(sys.version)")
    print(f"installed and ran under {python}: Python {interpreter.strip()}")  # noqa: T201
    if python != sys.executable:
        assert interpreter.startswith("3.10."), interpreter
