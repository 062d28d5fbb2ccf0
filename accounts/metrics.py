"""The accounts domain's Prometheus series (correct across gunicorn workers: counters only)."""

from prometheus_client import Counter

SIGN_IN_OUTCOMES = (
    "success",
    "bad_credentials",
    "locked",
    "disabled",
    "expired",
    "email_not_confirmed",
    "credentials_expired",
    "two_factor_required",
    "staff_only",
)
sign_ins = Counter(
    "platform_sign_ins",
    "Sign-in attempts by outcome (success, bad_credentials, locked, disabled, expired, "
    "email_not_confirmed, credentials_expired, two_factor_required, staff_only)",
    ["outcome"],
)
# Every outcome's series from the first scrape: increase() misses a series' first increment.
for _outcome in SIGN_IN_OUTCOMES:
    sign_ins.labels(_outcome)
lockouts = Counter(
    "platform_account_lockouts",
    "Sign-in locks set by consecutive wrong passwords or second-factor codes, on an account or on "
    "a device token",
)
security_events = Counter(
    "platform_security_events", "Security events written to the audit log, by kind", ["kind"]
)
codes_sent = Counter(
    "platform_codes_sent", "E-mails and SMS handed to their backend, by channel", ["channel"]
)
