from django.urls import path

from accounts.web import bus, views

urlpatterns = [
    path("login", views.login_page, name="login"),
    path("login/two-factor", views.two_factor_page, name="login-two-factor"),
    path("logout", views.logout_page, name="logout"),
    path("register", views.register_page, name="register"),
    path("register/confirm", views.register_confirm_page, name="register-confirm"),
    path("reset-password", views.reset_request_page, name="reset-password"),
    path("reset-password/confirm", views.reset_confirm_page, name="reset-password-confirm"),
    path("welcome", views.welcome_page, name="welcome"),
    path("settings/security", views.security_page, name="security"),
    path("settings/password", views.password_page, name="password"),
    path("settings/two-factor", views.two_factor_confirm_page, name="two-factor-confirm"),
    path("settings/two-factor/enable", views.two_factor_enable_page, name="two-factor-enable"),
    path("settings/two-factor/disable", views.two_factor_disable_page, name="two-factor-disable"),
    path("settings/sessions/revoke", views.session_revoke_page, name="session-revoke"),
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
