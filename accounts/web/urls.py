from django.urls import path

from accounts.session_rules import Action, performs
from accounts.web import bus, passwords, profile, registration, sign_in, two_factor

urlpatterns = [
    path("login", sign_in.login_page, name="login"),
    path("login/two-factor", sign_in.two_factor_page, name="login-two-factor"),
    path("logout", performs(Action.SIGN_OUT)(sign_in.logout_page), name="logout"),
    path("register", registration.register_page, name="register"),
    path("register/confirm", registration.register_confirm_page, name="register-confirm"),
    path("reset-password", passwords.reset_request_page, name="reset-password"),
    path("reset-password/confirm", passwords.reset_confirm_page, name="reset-password-confirm"),
    path("welcome", profile.welcome_page, name="welcome"),
    path("settings/security", profile.security_page, name="security"),
    path(
        "settings/password",
        performs(Action.CHANGE_PASSWORD)(passwords.password_page),
        name="password",
    ),
    path("settings/two-factor", profile.two_factor_confirm_page, name="two-factor-confirm"),
    path("settings/two-factor/enable", profile.two_factor_enable_page, name="two-factor-enable"),
    path("settings/two-factor/disable", profile.two_factor_disable_page, name="two-factor-disable"),
    path("settings/two-factor/app/start", two_factor.app_start_page, name="two-factor-app-start"),
    path("settings/two-factor/app", two_factor.app_confirm_page, name="two-factor-app"),
    path(
        "settings/two-factor/recovery-codes",
        two_factor.recovery_codes_new_page,
        name="two-factor-recovery-codes",
    ),
    path("settings/sessions/revoke", profile.session_revoke_page, name="session-revoke"),
    path("bus", bus.bus_page, name="bus"),
    path("bus/adapters", bus.adapter_create_page, name="adapter-create"),
    path("bus/adapters/<int:adapter_id>/purge", bus.adapter_purge_page, name="adapter-purge"),
    path(
        "bus/adapters/<int:adapter_id>/<slug:action>",
        bus.adapter_action_page,
        name="adapter-action",
    ),
    path("bus/dead-letters/redrive", bus.redrive_page, name="redrive"),
]
