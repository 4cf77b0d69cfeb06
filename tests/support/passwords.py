"""Password hashing for the suite: PBKDF2-SHA256 with 1,000 iterations instead of Django's
1,000,000.

A user made or signed in with a password costs ~0.45 s of CPU per hash at Django's count,
and the page, browser and access tests make hundreds (about a minute of the suite's wall
time on two cores). The algorithm, the stored format and the checks are Django's own; only
the iteration count, which the stored hash carries, is lower. A server the tests start in
another process (default settings) verifies these hashes too: PBKDF2 reads the count from
the hash (and, on a successful login, re-hashes it at its own count)."""
from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher

HASHERS = ["tests.support.passwords.QuickPBKDF2PasswordHasher",
           "django.contrib.auth.hashers.PBKDF2PasswordHasher"]


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
