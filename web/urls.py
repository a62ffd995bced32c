from django.contrib.auth import views as auth_views
from django.urls import path

from web.views import home

app_name = "web"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", home.home, name="home"),
    path("home/health/", home.health_panel, name="health"),
    path("space/", home.space_switch, name="space-switch"),
]
