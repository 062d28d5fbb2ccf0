"""Two gunicorn workers that remember session rows (Redis configured): a session ended through
one worker fails on its very next request on both."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.stack.conftest import ROOT, Gunicorn, StackDatabase
from tests.stack.processes import running_gunicorn
from tests.stack.test_auth_races import PASSWORD, create_adapter

pytestmark = pytest.mark.stack

REDIS_URL = "redis://127.0.0.1:6379/10"  # a database of these tests' own (CI's suite uses 0)
PARALLEL = 8
REQUESTS = 48


@pytest.fixture(scope="module")
def server(
    stack_database: StackDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    env = {"REDIS_URL": REDIS_URL, "ACCOUNTS_RATE_LIMIT_IP": "10000/m"}
    with running_gunicorn(stack_database, tmp_path_factory.mktemp("remembered"), env) as gunicorn:
        yield gunicorn


def whoamis(server: Gunicorn, headers: dict[str, str]) -> list[int]:
    """REQUESTS calls from PARALLEL threads, each on a new connection: both workers serve some."""

    def call(_: int) -> int:
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            return client.get("/api/exchange/whoami", headers=headers).status_code

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return list(pool.map(call, range(REQUESTS)))


def served_by_both_workers(server: Gunicorn) -> bool:
    pids = {path.stem.rsplit("_", 1)[-1] for path in server.metrics_dir.glob("summary_*.db")}
    return len(pids) == 2


@pytest.mark.parametrize("ending", ["logout", "rotation"])
def test_a_session_both_workers_remember_fails_on_both_right_after_it_ends(
    server: Gunicorn, stack_database: StackDatabase, ending: str
) -> None:
    login = f"remembered-{ending}"
    create_adapter(stack_database, login)
    signed_in = httpx.post(
        f"{server.base_url}/api/auth/login/username",
        json={"username": login, "password": PASSWORD},
        headers={"X-Device-ID": "loop-1"},
        timeout=30,
    ).json()
    headers = {"Authorization": f"Bearer {signed_in['accessToken']}", "X-Device-ID": "loop-1"}
    assert whoamis(server, headers) == [200] * REQUESTS
    assert served_by_both_workers(server)

    if ending == "logout":
        ended = httpx.post(
            f"{server.base_url}/api/auth/logout",
            json={"refreshToken": signed_in["refreshToken"]},
            headers=headers,
            timeout=30,
        )
    else:  # the password is rotated from another process altogether, with the same Redis
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-v", "0", "-c",
             "from accounts.models import User\n"
             "from accounts.services.adapters import adapter_password_rotate\n"
             f"adapter_password_rotate(adapter=User.objects.get(username='{login}'))\n"],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": stack_database.url, "REDIS_URL": REDIS_URL},
            check=True,
            timeout=120,
        )  # fmt: skip
        ended = httpx.Response(200)
    assert ended.status_code == 200

    assert whoamis(server, headers) == [401] * REQUESTS
