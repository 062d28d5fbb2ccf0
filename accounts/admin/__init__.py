"""The accounts' admin: the users (cabinet users and adapters) with their actions, and the
records the platform keeps about signing in. Importing the modules registers them."""

from accounts.admin import records, users

__all__ = ["records", "users"]
