from django.urls import path

from accounts.dev import dev_outbox
from accounts.session_rules import Action, performs
from accounts.web import (
    account,
    deletion,
    passkeys,
    passwords,
    profile,
    registration,
    second_step,
    security,
    sign_in,
    two_factor,
)

urlpatterns = [
    path("login", sign_in.login_page, name="login"),
    path("login/two-factor", second_step.two_factor_page, name="login-two-factor"),
    path(
        "login/two-factor/options",
        second_step.two_factor_options_page,
        name="login-two-factor-options",
    ),
    path("login/passkey", passkeys.passkey_sign_in_page, name="login-passkey"),
    path(
        "login/passkey/options",
        passkeys.passkey_sign_in_options_page,
        name="login-passkey-options",
    ),
    path("logout", performs(Action.SIGN_OUT)(sign_in.logout_page), name="logout"),
    path("register", registration.register_page, name="register"),
    path("register/confirm", registration.register_confirm_page, name="register-confirm"),
    path("reset-password", passwords.reset_request_page, name="reset-password"),
    path("reset-password/confirm", passwords.reset_confirm_page, name="reset-password-confirm"),
    path("welcome", profile.welcome_page, name="welcome"),
    path("settings/profile", account.profile_page, name="profile"),
    path("settings/profile/delete", deletion.account_delete_page, name="account-delete"),
    path(
        "settings/profile/delete/options",
        deletion.account_delete_options_page,
        name="account-delete-options",
    ),
    path("settings/email", account.email_change_page, name="email-change"),
    path("settings/email/confirm", account.email_change_confirm_page, name="email-change-confirm"),
    path("settings/security", security.security_page, name="security"),
    path(
        "settings/password",
        performs(Action.CHANGE_PASSWORD)(passwords.password_page),
        name="password",
    ),
    path("settings/two-factor", profile.two_factor_confirm_page, name="two-factor-confirm"),
    path("settings/two-factor/enable", profile.two_factor_enable_page, name="two-factor-enable"),
    path("settings/two-factor/disable", profile.two_factor_disable_page, name="two-factor-disable"),
    path("settings/two-factor/first", security.first_factor_page, name="two-factor-first"),
    path("settings/two-factor/app/start", two_factor.app_start_page, name="two-factor-app-start"),
    path("settings/two-factor/app", two_factor.app_confirm_page, name="two-factor-app"),
    path(
        "settings/two-factor/recovery-codes",
        two_factor.recovery_codes_new_page,
        name="two-factor-recovery-codes",
    ),
    path("settings/passkeys", passkeys.passkey_add_page, name="passkey-add"),
    path("settings/passkeys/options", passkeys.passkey_options_page, name="passkey-options"),
    path(
        "settings/passkeys/<uuid:passkey_id>/remove",
        passkeys.passkey_remove_page,
        name="passkey-remove",
    ),
    path("settings/sessions/revoke", profile.session_revoke_page, name="session-revoke"),
    path("dev/outbox", performs(Action.PAGE_SUPPORT)(dev_outbox), name="dev-outbox"),
    # Django's set_language, which also keeps a signed-in person's choice on the account.
    path(
        "i18n/setlang/",
        performs(Action.PAGE_SUPPORT)(profile.language_switch_page),
        name="set_language",
    ),
]
