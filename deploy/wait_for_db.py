"""Wait until the PostgreSQL server of DATABASE_URL accepts connections (deploy/entrypoint.sh).

Exits 0 once a connection succeeds, 1 after --timeout seconds of failures. The password never
appears in the messages: only the error's first line, which libpq writes without it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import psycopg


def wait(url: str, timeout: float, interval: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    attempt = 0
    while True:
        attempt += 1
        try:
            with psycopg.connect(url, connect_timeout=3) as connection:
                connection.execute("SELECT 1")
        except psycopg.Error as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
            if time.monotonic() >= deadline:
                sys.stderr.write(f"wait_for_db: giving up after {attempt} attempts: {reason}\n")
                return False
            if attempt == 1 or attempt % 10 == 0:
                sys.stderr.write(f"wait_for_db: database not ready ({reason}); retrying\n")
            time.sleep(interval)
        else:
            return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url:
        sys.stderr.write("wait_for_db: DATABASE_URL is not set\n")
        return 1
    return 0 if wait(url, args.timeout) else 1


if __name__ == "__main__":
    sys.exit(main())
