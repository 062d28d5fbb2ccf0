from django.urls import path

from accounts.api import confirmations, passkeys, profile, views

urlpatterns = [
    path("auth/login/email", views.LoginEmailApi.as_view()),
    path("auth/login/username", views.LoginUsernameApi.as_view()),
    path("auth/login/two-factor/confirm", confirmations.TwoFactorConfirmApi.as_view()),
    path("auth/login/two-factor/resend", confirmations.TwoFactorResendApi.as_view()),
    path("auth/login/passkey/options", passkeys.PasskeySignInOptionsApi.as_view()),
    path("auth/login/passkey", passkeys.PasskeySignInApi.as_view()),
    path("auth/refresh", views.RefreshApi.as_view()),
    path("auth/logout", views.LogoutApi.as_view()),
    path("auth/register", confirmations.RegisterApi.as_view()),
    path("auth/register/verify-email/confirm", confirmations.VerifyEmailConfirmApi.as_view()),
    path("auth/register/verify-email/resend", confirmations.VerifyEmailResendApi.as_view()),
    path("auth/reset-password", confirmations.ResetPasswordApi.as_view()),
    path("auth/reset-password/resend", confirmations.ResetPasswordResendApi.as_view()),
    path("auth/reset-password/confirm", confirmations.ResetPasswordConfirmApi.as_view()),
    path("users/me", profile.MeApi.as_view()),
    path("users/change-password", profile.ChangePasswordApi.as_view()),
    path("users/two-factor-authentication", profile.TwoFactorApi.as_view()),
    path("users/two-factor-authentication/confirm", profile.TwoFactorConfirmApi.as_view()),
    path("users/two-factor-authentication/resend", profile.TwoFactorResendApi.as_view()),
    path("users/two-factor-authentication/totp", profile.TotpApi.as_view()),
    path("users/two-factor-authentication/totp/confirm", profile.TotpConfirmApi.as_view()),
    path("users/two-factor-authentication/recovery-codes", profile.RecoveryCodesApi.as_view()),
    path("users/passkeys", passkeys.PasskeysApi.as_view()),
    path("users/passkeys/registration/options", passkeys.PasskeyRegistrationOptionsApi.as_view()),
    path("users/passkeys/<uuid:passkey_id>", passkeys.PasskeyApi.as_view()),
    path("users/sessions", profile.SessionsApi.as_view()),
    path("users/sessions/<uuid:session_id>", profile.SessionApi.as_view()),
]
