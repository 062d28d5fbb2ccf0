"""Hosts on one machine: Linux network namespaces joined by a bridge, each namespace a host with an
address of its own and no route anywhere else, and the services a host runs (PostgreSQL, Redis,
RabbitMQ) started from the machine's own binaries inside it. The root namespace is the balancer's
host: the bridge's address is its own. Cutting a host sets its link down (``ip link set ...
down``), as a pulled cable would; restoring it sets it up again. Needs root (CI runs as root).

Every namespace, link and process made here is removed when its context exits."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from kombu import Connection

from tests.stack.conftest import traversable
from tests.stack.processes import running


@dataclass(frozen=True)
class Host:
    name: str  # the network namespace
    address: str  # on the bridge
    link: str  # the root namespace's end of its veth pair, on the bridge

    def launcher(self) -> list[str]:
        """The prefix that runs a command on this host."""
        return ["ip", "netns", "exec", self.name]

    def cut(self) -> None:
        ip("link", "set", self.link, "down")

    def restore(self) -> None:
        ip("link", "set", self.link, "up")


@dataclass(frozen=True)
class Network:
    balancer: str  # the root namespace's address on the bridge
    hosts: dict[str, Host]


def ip(*args: str, namespace: str | None = None) -> None:
    command = ["ip", *args] if namespace is None else ["ip", "-n", namespace, *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, f"{' '.join(command)}: {result.stderr}"


def free_subnet() -> str:
    """A /24 of 10.231.0.0/16 that no interface of the machine uses (its first three octets)."""
    used = subprocess.run(
        ["ip", "-o", "-4", "addr"], capture_output=True, text=True, check=True
    ).stdout
    for third in range(secrets.randbelow(200) + 20, 255):
        subnet = f"10.231.{third}"
        if f" {subnet}." not in used:
            return subnet
    raise AssertionError("no free subnet in 10.231.0.0/16")


@contextmanager
def network(names: Sequence[str]) -> Iterator[Network]:
    """A bridge in the root namespace and one namespace per name, each on the bridge."""
    if os.geteuid() != 0:
        pytest.fail("the hosts are network namespaces: run the stack tests as root (CI does)")
    tag = secrets.token_hex(2)
    bridge = f"ph{tag}br"
    subnet = free_subnet()
    hosts: dict[str, Host] = {}
    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{subnet}.1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for number, name in enumerate(names, start=2):
            host = Host(
                name=f"ph{tag}-{name}", address=f"{subnet}.{number}", link=f"ph{tag}{name}0"
            )
            hosts[name] = host
            ip("netns", "add", host.name)
            inside = f"ph{tag}{name}1"
            ip("link", "add", host.link, "type", "veth", "peer", "name", inside)
            ip("link", "set", inside, "netns", host.name)
            ip("link", "set", host.link, "master", bridge)
            ip("link", "set", host.link, "up")
            ip("addr", "add", f"{host.address}/24", "dev", inside, namespace=host.name)
            ip("link", "set", inside, "up", namespace=host.name)
            ip("link", "set", "lo", "up", namespace=host.name)
        yield Network(balancer=f"{subnet}.1", hosts=hosts)
    finally:
        for host in hosts.values():
            # Whatever still runs there (a process whose own stop failed) goes with it.
            pids = subprocess.run(
                ["ip", "netns", "pids", host.name], capture_output=True, text=True, check=False
            ).stdout.split()
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            subprocess.run(["ip", "netns", "del", host.name], check=False, timeout=30)
        subprocess.run(["ip", "link", "del", bridge], check=False, timeout=30)


def postgres_binaries() -> Path:
    """The newest PostgreSQL installed from Debian's packages (/usr/lib/postgresql/<major>/bin)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda path: int(path.parts[-3])
    )
    assert found, "no PostgreSQL under /usr/lib/postgresql"
    return found[-1].parent


def owned_by(path: Path, user: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    shutil.chown(path, user, user)
    traversable(path / "x")  # the directories above it, for the service's own user
    return path


@contextmanager
def running_postgres(host: Host, workdir: Path) -> Iterator[str]:
    """A PostgreSQL of the host's own, as the machine's ``postgres`` user, on its address, with a
    database ``platform``; its URL."""
    binaries = postgres_binaries()
    data = owned_by(workdir / "pg", "postgres")
    sockets = owned_by(workdir / "pg-sockets", "postgres")
    subprocess.run(
        [
            "runuser",
            "-u",
            "postgres",
            "--",
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    with (data / "pg_hba.conf").open("a") as hba:
        hba.write(f"host all all {host.address.rsplit('.', 1)[0]}.0/24 trust\n")
    url = f"postgresql://postgres@{host.address}:5432/postgres"

    def answers() -> bool:
        try:
            psycopg.connect(url, connect_timeout=1).close()
        except psycopg.OperationalError:
            return False
        return True

    command = [
        *host.launcher(),
        "runuser", "-u", "postgres", "--",
        str(binaries / "postgres"),
        "-D", str(data),
        "-c", f"listen_addresses={host.address}",
        "-c", f"unix_socket_directories={sockets}",
        "-c", "max_connections=200",
    ]  # fmt: skip
    with running(
        command, log_path=workdir / "postgres.log", ready=answers, what="PostgreSQL on host C"
    ):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE platform")
        yield url.removesuffix("/postgres") + "/platform"


@contextmanager
def running_redis(host: Host, workdir: Path) -> Iterator[str]:
    import redis

    url = f"redis://{host.address}:6379/0"

    def answers() -> bool:
        try:
            return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
        except redis.ConnectionError:
            return False

    command = [
        *host.launcher(),
        "redis-server", "--bind", host.address, "--port", "6379", "--save", "",
        "--appendonly", "no", "--protected-mode", "no", "--dir", str(workdir),
    ]  # fmt: skip
    with running(command, log_path=workdir / "redis.log", ready=answers, what="Redis on host C"):
        yield url


@contextmanager
def running_rabbitmq(host: Host, workdir: Path) -> Iterator[str]:
    """A RabbitMQ node of the host's own (node name ``ph@localhost``, its own epmd on the host's
    loopback), as the machine's ``rabbitmq`` user, guest allowed from the other hosts."""
    base = owned_by(workdir / "rabbitmq", "rabbitmq")
    config = base / "rabbitmq.conf"
    config.write_text("loopback_users = none\nlisteners.tcp.default = 5672\n")
    plugins = base / "enabled_plugins"
    plugins.write_text("[].\n")
    for path in (config, plugins):
        shutil.chown(path, "rabbitmq", "rabbitmq")
    url = f"amqp://guest:guest@{host.address}:5672//"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(base),
        "RABBITMQ_NODENAME": "ph@localhost",
        "RABBITMQ_CONFIG_FILE": str(config),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(plugins),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
    }

    def answers() -> bool:
        try:
            with Connection(url, connect_timeout=1) as connection:
                connection.connect()
        except OSError:
            return False
        return True

    command = [
        *host.launcher(),
        "runuser", "--preserve-environment", "-u", "rabbitmq", "--",
        "/usr/lib/rabbitmq/bin/rabbitmq-server",
    ]  # fmt: skip
    with running(
        command,
        log_path=workdir / "rabbitmq.log",
        env=env,
        cwd=base,
        ready=answers,
        what="RabbitMQ on host C",
        timeout=120,
    ):
        yield url
