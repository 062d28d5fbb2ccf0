"""A consumer process for the stack tests: receive, record, ACK, until told to stop.

    python consumer.py BASE LOGIN PASSWORD DEVICE_ID LOG_FILE [DIE_AFTER_BATCHES]

Writes "received <id>" and "acked <id>" lines to LOG_FILE. With DIE_AFTER_BATCHES it exits
abruptly after receiving that many batches, before their ACK: killed mid-lease.
"""

from __future__ import annotations

import os
import sys
import time

import httpx


def main() -> None:
    base, login, password, device, log_path = sys.argv[1:6]
    die_after = int(sys.argv[6]) if len(sys.argv) > 6 else None
    headers = {"X-Device-ID": device}
    with (
        httpx.Client(base_url=base, headers=headers, timeout=30) as client,
        open(log_path, "a") as log,
    ):
        while True:
            signed_in = client.post(
                "/api/auth/login/username", json={"username": login, "password": password}
            )
            if signed_in.status_code == 200:
                break
            sys.stderr.write(
                f"{device}: sign-in answered {signed_in.status_code} {signed_in.text}\n"
            )
            time.sleep(0.5)
        client.headers["Authorization"] = f"Bearer {signed_in.json()['accessToken']}"
        batches = 0
        while True:
            response = client.get(
                "/api/exchange/messages", params={"max": 20, "waitSeconds": 1, "leaseSeconds": 3}
            )
            if response.status_code != 200:
                continue  # a busy server: ask again
            messages = response.json()["messages"]
            for message in messages:
                log.write(f"received {message['messageId']}\n")
            log.flush()
            if not messages:
                continue
            batches += 1
            if die_after is not None and batches >= die_after:
                log.write("dying\n")
                log.flush()
                os._exit(1)
            ids = [message["messageId"] for message in messages]
            acked = client.post("/api/exchange/messages/ack", json={"messageIds": ids})
            if acked.status_code == 200:
                for result in acked.json()["results"]:
                    log.write(f"{result['status']} {result['messageId']}\n")
                log.flush()


if __name__ == "__main__":
    main()
