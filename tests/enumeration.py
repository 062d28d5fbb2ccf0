"""The work a request does, recorded so that a known account's path can be compared with an
unknown one's without a clock: the password hashes it computes and the SQL statements it runs.

The hashes come from the real Argon2 hasher: :class:`RecordingArgon2PasswordHasher` is Django's,
unchanged, and also notes each hash it computes. The ``work_of`` fixture (tests/conftest.py)
installs it as the first of PASSWORD_HASHERS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import argon2
from django.contrib.auth.hashers import Argon2PasswordHasher

ARGON2_HASHER = "django.contrib.auth.hashers.Argon2PasswordHasher"
RECORDING_HASHER = "tests.enumeration.RecordingArgon2PasswordHasher"
# Argon2id as Django's hasher is configured: (algorithm, type, time, memory, parallelism).
ARGON2_CONFIGURED = (
    "argon2",
    argon2.Type.ID,
    Argon2PasswordHasher.time_cost,
    Argon2PasswordHasher.memory_cost,
    Argon2PasswordHasher.parallelism,
)


@dataclass(frozen=True)
class Hashing:
    """One Argon2 hash computed: a new one (``encode``) or a stored one again (``verify``). The
    work is the algorithm and its parameters (time cost, memory cost, parallelism...), whichever
    the operation."""

    operation: Literal["encode", "verify"]
    algorithm: str
    parameters: argon2.Parameters

    @property
    def cost(self) -> tuple[str, argon2.Parameters]:
        return self.algorithm, self.parameters

    @property
    def configuration(self) -> tuple[str, argon2.Type, int, int, int]:
        """Compared with ARGON2_CONFIGURED."""
        parameters = self.parameters
        return (
            self.algorithm,
            parameters.type,
            parameters.time_cost,
            parameters.memory_cost,
            parameters.parallelism,
        )


class RecordingArgon2PasswordHasher(Argon2PasswordHasher):
    """Django's Argon2 hasher that also records every hash it computes (a spy: each one is still
    computed, and a wrong password is still wrong)."""

    def __init__(self) -> None:
        self.computed: list[Hashing] = []

    def encode(self, password: str, salt: str) -> str:
        encoded = super().encode(password, salt)
        self.computed.append(self._hashing("encode", encoded))
        return encoded

    def verify(self, password: str, encoded: str) -> bool:
        self.computed.append(self._hashing("verify", encoded))
        return super().verify(password, encoded)

    def _hashing(self, operation: Literal["encode", "verify"], encoded: str) -> Hashing:
        # Verifying recomputes the hash with the parameters stored in it, not the configured ones.
        algorithm, rest = encoded.split("$", 1)
        return Hashing(operation, algorithm, argon2.extract_parameters("$" + rest))


@dataclass(frozen=True)
class Work:
    """What one request did, besides answering ``status``."""

    status: int
    hashing: list[Hashing]
    statements: list[str]  # SQL statement shapes, in order
    on_commit: list[str]  # the callbacks queued for the commit (Celery tasks sent then)

    @property
    def hashing_costs(self) -> list[tuple[str, argon2.Parameters]]:
        return [hashing.cost for hashing in self.hashing]


# Values as psycopg writes them into the SQL it sent, each with its cast if any: quoted strings
# (quotes doubled inside, newlines allowed), numbers, NULL (not in IS NULL, a shape of its own),
# booleans. Savepoint names carry a per-connection counter.
_STRING = re.compile(r"'(?:[^']|'')*'(?:::\w+)?")
_SAVEPOINT = re.compile(r'"s\d+_x\d+"')
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?\b(?:::\w+)?")
_NULL = re.compile(r"(?<!\bIS )(?<!\bNOT )\bNULL\b(?:::\w+)?")
_BOOLEAN = re.compile(r"\b(?:true|false)\b(?:::\w+)?")
_SPACE = re.compile(r"\s+")


def statement_shape(sql: str) -> str:
    """``sql`` with every value replaced by ``?``: the statement, whatever its parameters."""
    shape = _STRING.sub("?", sql)
    shape = _SAVEPOINT.sub('"savepoint"', shape)
    shape = _NUMBER.sub("?", shape)
    shape = _NULL.sub("?", shape)
    shape = _BOOLEAN.sub("?", shape)
    return _SPACE.sub(" ", shape).strip()
