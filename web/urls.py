from django.contrib.auth import views as auth_views
from django.urls import path

from web.views import board, brain, home, quality, tokens
from web.views.common import LoginView

app_name = "web"

urlpatterns = [
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", home.home, name="home"),
    path("home/health/", home.health_panel, name="health"),
    path("space/", home.space_switch, name="space-switch"),
    # task board
    path("board/", board.board, name="board"),
    path("tasks/<str:ref>/", board.task_detail, name="task"),
    path("tasks/<str:ref>/moves/", board.task_moves, name="task-moves"),
    path("tasks/<str:ref>/transition/", board.task_transition_post, name="task-transition"),
    path("tasks/<str:ref>/confirm/", board.task_confirm_post, name="task-confirm"),
    path("tasks/<str:ref>/dna/", board.task_dna_post, name="task-dna"),
    # brain explorer
    path("brain/", brain.explorer, name="brain"),
    path("brain/thoughts/<uuid:thought_id>/", brain.thought_detail, name="thought"),
    path("brain/thoughts/<uuid:thought_id>/correct/", brain.thought_correct_post, name="thought-correct"),
    path("brain/thoughts/<uuid:thought_id>/retract/", brain.thought_retract_post, name="thought-retract"),
    path("brain/suggestions/<uuid:suggestion_id>/accept/", brain.suggestion_accept_post, name="suggestion-accept"),
    path("brain/suggestions/<uuid:suggestion_id>/dismiss/", brain.suggestion_dismiss_post, name="suggestion-dismiss"),
    # read-only URL tokens (seed 003 layer B)
    path("tokens/", tokens.url_tokens, name="url-tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.url_token_revoke, name="url-token-revoke"),
    # quality dashboard
    path("quality/", quality.dashboard, name="quality"),
]
