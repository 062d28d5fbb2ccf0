from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from accounts import schema  # noqa: F401  (the OpenAPI security scheme)

        _sign_in_signals_write_nothing()


def _sign_in_signals_write_nothing() -> None:
    """The sign-in services write last_login and django-axes' record of the attempt themselves
    (accounts.services.sign_in). Django's and axes' receivers of the sign-in signals would write
    them again whenever ``login()`` is called (the cabinet's session, after a sign-in the
    service has recorded), so they are disconnected; axes' receiver of ``user_logged_out``, the
    only writer of its access log's logout time, stays."""
    from axes import signals as axes_signals
    from django.contrib.auth.signals import user_logged_in, user_login_failed

    user_logged_in.disconnect(dispatch_uid="update_last_login")
    user_logged_in.disconnect(axes_signals.handle_user_logged_in)
    user_login_failed.disconnect(axes_signals.handle_user_login_failed)
