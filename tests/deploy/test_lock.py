"""The locks in requirements/ (docs/deployment.md, "The locks"): what `make install` (so CI) and the
image install, every file checked against its hash. They fail when a lock is stale: a requirement of
pyproject.toml (dependencies, dev extras, [build-system]), of clients/python/pyproject.toml or of
requirements/build.in that its lock lacks or pins outside the range, a pin that another pin's
requirements exclude, a pin that nothing needs any more. `make lock` refreshes them.

The locks' graph is read from the installed distributions' metadata: `make install` installs
exactly build.txt and dev.txt (a superset of runtime.txt), so every pin is installed; a pin that
is not installed at its version is reported (run `make install`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements"
LOCKS = ("build", "runtime", "dev")
# What the locks are resolved for (the Makefile's UV_COMPILE): CPython 3.11 on Linux x86_64, any
# patch release (a marker such as python_full_version < "3.11.3" counts).
TARGETS: list[dict[str, str]] = [
    {
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "python_version": "3.11",
        "python_full_version": patch,
        "implementation_version": patch,
        "platform_release": "",
        "platform_version": "",
    }
    for patch in ("3.11.0", "3.11.99")
]


@dataclass(frozen=True)
class Pin:
    version: Version
    hashes: tuple[str, ...]


def read_lock(name: str) -> tuple[dict[str, Pin], list[str]]:
    return parse_lock(name, (REQUIREMENTS / f"{name}.txt").read_text())


def parse_lock(name: str, text: str) -> tuple[dict[str, Pin], list[str]]:
    """The pins of a lock by canonical name, and its lines that are not one exact version of a
    registry package with its sha256 hashes."""
    pins: dict[str, Pin] = {}
    problems: list[str] = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            # No options: an index, a find-links or a build option would apply to every install.
            problems.append(f"{name}.txt: {line}")
            continue
        spec, *hashes = re.split(r"\s+--hash=", line)
        try:
            requirement = Requirement(spec)
        except InvalidRequirement:
            problems.append(f"{name}.txt: not a requirement: {spec}")
            continue
        operators = [(s.operator, s.version) for s in requirement.specifier]
        if len(operators) != 1 or operators[0][0] != "==" or "*" in operators[0][1]:
            problems.append(f"{name}.txt: {spec} is not one exact version")
            continue
        if requirement.url or requirement.marker or requirement.extras:
            problems.append(f"{name}.txt: {spec} has a URL, marker or extras")
        if not hashes:
            problems.append(f"{name}.txt: {spec} has no hash")
        problems += [
            f"{name}.txt: {spec}: {h}"
            for h in hashes
            if not re.fullmatch(r"sha256:[0-9a-f]{64}", h)
        ]
        key = canonicalize_name(requirement.name)
        if key in pins:
            problems.append(f"{name}.txt: {key} is pinned twice")
        pins[key] = Pin(Version(operators[0][1]), tuple(hashes))
    return pins, problems


def pins_of(name: str) -> dict[str, Pin]:
    pins, problems = read_lock(name)
    assert problems == []
    return pins


def pyproject(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads(path.read_text())
    return data


def requirements_in(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def declared(lock: str) -> list[Requirement]:
    """What each lock is compiled from (the Makefile's `lock` target)."""
    platform = pyproject(ROOT / "pyproject.toml")
    client = pyproject(ROOT / "clients" / "python" / "pyproject.toml")
    texts = {
        "build": [
            *requirements_in(REQUIREMENTS / "build.in"),
            *platform["build-system"]["requires"],
            *client["build-system"]["requires"],
        ],
        "runtime": platform["project"]["dependencies"],
        "dev": [
            *platform["project"]["dependencies"],
            *platform["project"]["optional-dependencies"]["dev"],
            *client["project"]["dependencies"],
        ],
    }[lock]
    return [Requirement(text) for text in texts]


def applies(requirement: Requirement, extra: str = "") -> bool:
    marker = requirement.marker
    return marker is None or any(marker.evaluate({**env, "extra": extra}) for env in TARGETS)


def installed_requirements(name: str, pin: Pin) -> list[Requirement]:
    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{name}=={pin.version} is pinned but not installed: run make install")
    if Version(distribution.version) != pin.version:
        pytest.fail(
            f"{name}=={pin.version} is pinned, {distribution.version} is installed: run make install"
        )
    return [Requirement(text) for text in distribution.requires or []]


def walk(roots: list[Requirement], pins: dict[str, Pin]) -> tuple[set[str], list[str]]:
    """The names the roots need on the target, following each pin's requirements (with the extras
    asked for), and every requirement on the way that the pins do not satisfy."""
    needed: set[str] = set()
    problems: list[str] = []
    visited: set[tuple[str, str]] = set()
    queue = [(root, "pyproject.toml") for root in roots if applies(root)]
    while queue:
        requirement, wanted_by = queue.pop()
        name = canonicalize_name(requirement.name)
        pin = pins.get(name)
        if pin is None:
            problems.append(f"{requirement} (for {wanted_by}) is not pinned")
            continue
        if not requirement.specifier.contains(pin.version, prereleases=True):
            problems.append(f"{requirement} (for {wanted_by}) excludes the pin {pin.version}")
        needed.add(name)
        for extra in {"", *requirement.extras}:
            if (name, extra) in visited:
                continue
            visited.add((name, extra))
            queue += [
                (child, f"{name}[{extra}]" if extra else name)
                for child in installed_requirements(name, pin)
                if applies(child, extra)
            ]
    return needed, problems


@pytest.mark.parametrize("lock", LOCKS)
def test_every_line_pins_one_version_of_a_registry_package_with_its_hashes(lock: str) -> None:
    pins, problems = read_lock(lock)
    assert problems == []
    assert pins


@pytest.mark.parametrize("lock", LOCKS)
def test_every_declared_requirement_is_pinned_within_its_range(lock: str) -> None:
    pins = pins_of(lock)
    roots = [requirement for requirement in declared(lock) if applies(requirement)]
    assert roots
    missing = [str(r) for r in roots if canonicalize_name(r.name) not in pins]
    outside = [
        f"{r} (pinned {pins[canonicalize_name(r.name)].version})"
        for r in roots
        if canonicalize_name(r.name) in pins
        and not r.specifier.contains(pins[canonicalize_name(r.name)].version, prereleases=True)
    ]
    assert missing == [], "not in the lock: run make lock"
    assert outside == [], "pinned outside the range: run make lock"


@pytest.mark.parametrize("lock", LOCKS)
def test_each_lock_holds_exactly_what_its_requirements_need(lock: str) -> None:
    pins = pins_of(lock)
    needed, problems = walk(declared(lock), pins)
    assert problems == [], "run make lock"
    assert set(pins) - needed == set(), "pinned, and nothing needs them: run make lock"


def test_the_checks_have_teeth() -> None:
    digest = "--hash=sha256:" + "0" * 64
    _, problems = parse_lock(
        "broken",
        f"django==5.2.19\nredis>=5 {digest}\n-e .\n--index-url https://example.org/simple\n"
        f"celery==5.7.0 \\\n    {digest}\n    # via a comment\n",
    )
    assert [problem.split(": ", 1)[1] for problem in problems] == [
        "django==5.2.19 has no hash",
        "redis>=5 is not one exact version",
        "-e .",
        "--index-url https://example.org/simple",
    ]
    pins = pins_of("runtime")
    needed, problems = walk(
        [Requirement("celery>=5.5"), Requirement("Django>=6")],
        {name: pin for name, pin in pins.items() if name != "kombu"},
    )
    assert [problem.split(" (for ")[1] for problem in problems] == [
        f"pyproject.toml) excludes the pin {pins['django'].version}",
        "celery) is not pinned",
    ]
    assert "psycopg" not in needed


def test_the_dev_lock_runs_the_runtime_locks_versions() -> None:
    # CI tests the versions the image runs; what both locks pin, they pin alike.
    build, runtime, dev = (pins_of(lock) for lock in LOCKS)
    assert {name: runtime[name] for name in runtime if dev.get(name) != runtime[name]} == {}
    for pins in (runtime, dev):
        assert {
            name: build[name] for name in build if pins.get(name, build[name]) != build[name]
        } == {}


def make_dry_run(target: str) -> list[str]:
    """The commands `make <target>` runs, variables expanded, without running them."""
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    done = subprocess.run(
        ["make", "--dry-run", "--always-make", "--no-print-directory", target],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return [re.sub(r"\s+", " ", line) for line in done.stdout.replace("\\\n", " ").splitlines()]


def test_make_lock_resolves_each_lock_for_the_python_ci_and_the_image_run() -> None:
    compiles = [command for command in make_dry_run("lock") if " pip compile " in command]
    outputs = [re.findall(r" -o (\S+)", command) for command in compiles]
    assert outputs == [[f"requirements/{lock}.txt"] for lock in LOCKS]
    for command in compiles:
        for flag in (
            "--generate-hashes",
            "--python-version 3.11",
            "--python-platform x86_64-unknown-linux-gnu",
            "--only-binary :all:",
        ):
            assert flag in command
    # From what declared() reads: build.in; the platform; the platform with its dev extras and
    # the client, constrained to the runtime lock's versions.
    assert " requirements/build.in " in compiles[0]
    assert " pyproject.toml " in compiles[1]
    assert "--extra" not in compiles[1]
    assert " pyproject.toml clients/python/pyproject.toml --extra dev " in compiles[2]
    assert "-c requirements/runtime.txt" in compiles[2]
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-", (ROOT / "Dockerfile").read_text(), re.M)
    # make install and CI run the tests on the lock's Python.
    assert sys.implementation.name == "cpython"
    assert sys.version_info[:2] == (3, 11)


def dockerfile_commands() -> list[str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return [re.sub(r"\s+", " ", line) for line in text.splitlines()]


@pytest.mark.parametrize(("where", "lock"), [("Makefile", "dev"), ("Dockerfile", "runtime")])
def test_make_install_and_the_image_install_the_locks_and_nothing_unpinned(
    where: str, lock: str
) -> None:
    lines = make_dry_run("install") if where == "Makefile" else dockerfile_commands()
    commands = [command.strip() for line in lines for command in line.split("&&")]
    installs = [command for command in commands if re.search(r"\bpip install\b", command)]
    locked = [command for command in installs if "--require-hashes" in command]
    assert [re.findall(r"-r (\S+)", command) for command in locked] == [
        ["requirements/build.txt"],
        [f"requirements/{lock}.txt"],
    ]
    # Wheels, and the few sdists (the Makefile's SDISTS) built with the locked backends rather than
    # with ones fetched for the build.
    assert all("--only-binary :all:" in command for command in locked)
    assert "--no-build-isolation" in locked[1]
    # Beside the locks only the projects themselves, in place, without their dependencies.
    rest = [command for command in installs if command not in locked]
    assert rest
    for command in rest:
        assert "--no-deps" in command
        assert "--no-build-isolation" in command
        targets = re.findall(r"-e (\S+)", command)
        assert targets
        assert set(targets) <= {".", "./clients/python"}
    assert any(command.endswith("pip check") for command in commands)
    assert "requirements" not in (ROOT / ".dockerignore").read_text().split()
