"""`make run`'s server: the platform's ASGI application under uvicorn, one process that restarts
when a source file changes, and that ends its streams and long polls before it does (the
production worker's Server: platform_site/worker.py).

    python -m platform_site.develop --host 127.0.0.1 --port 8000
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

import uvicorn
from uvicorn.supervisors import ChangeReload

from platform_site.worker import Server, Worker

WATCHED = ["accounts", "exchange", "health", "platform_site", "templates"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    arguments = parser.parse_args(argv)
    # Passkeys are made for the origin the browser shows: this server's port on localhost (a
    # secure context over http, where a bare IP address is not), unless the settings say more.
    os.environ.setdefault("WEBAUTHN_ORIGINS", f"http://localhost:{arguments.port}")
    config = uvicorn.Config(
        "platform_site.asgi:application",
        host=arguments.host,
        port=arguments.port,
        reload=True,
        reload_dirs=WATCHED,
        reload_includes=["*.html"],
        access_log=False,
        **Worker.CONFIG_KWARGS,
    )
    server = Server(config)
    ChangeReload(config, target=server.run, sockets=[config.bind_socket()]).run()


if __name__ == "__main__":
    main()
