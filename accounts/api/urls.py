from django.urls import path

from accounts.api import views

urlpatterns = [
    path("auth/login/email", views.LoginEmailApi.as_view()),
    path("auth/login/username", views.LoginUsernameApi.as_view()),
    path("auth/refresh", views.RefreshApi.as_view()),
    path("auth/logout", views.LogoutApi.as_view()),
    path("users/adapters", views.AdaptersApi.as_view()),
    path("users/adapters/<int:adapter_id>", views.AdapterApi.as_view()),
    path("users/adapters/<int:adapter_id>/password", views.AdapterPasswordApi.as_view()),
    path("users/adapters/<int:adapter_id>/routes", views.AdapterRoutesApi.as_view()),
    path("users/adapters/<int:adapter_id>/routes/<int:sender_id>", views.AdapterRouteApi.as_view()),
]
