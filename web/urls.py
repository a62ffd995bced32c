from django.contrib.auth import views as auth_views
from django.urls import path

from web.views import board, home

app_name = "web"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", home.home, name="home"),
    path("home/health/", home.health_panel, name="health"),
    path("space/", home.space_switch, name="space-switch"),
    path("board/", board.board, name="board"),
    path("tasks/<str:ref>/", board.task_detail, name="task"),
    path("tasks/<str:ref>/moves/", board.task_moves, name="task-moves"),
    path("tasks/<str:ref>/transition/", board.task_transition_post, name="task-transition"),
    path("tasks/<str:ref>/confirm/", board.task_confirm_post, name="task-confirm"),
    path("tasks/<str:ref>/dna/", board.task_dna_post, name="task-dna"),
]
