from django.urls import path

from tasks import apis

urlpatterns = [
    path("projects", apis.ProjectListCreateApi.as_view(), name="project-list"),
    path("tasks", apis.TaskListCreateApi.as_view(), name="task-list"),
    path("tasks/<str:id_or_slug>", apis.TaskDetailApi.as_view(), name="task-detail"),
    path("tasks/<str:id_or_slug>/dna", apis.TaskDnaApi.as_view(), name="task-dna"),
    path("tasks/<str:id_or_slug>/transition", apis.TaskTransitionApi.as_view(), name="task-transition"),
    path("tasks/<str:id_or_slug>/transitions", apis.TaskTransitionsApi.as_view(), name="task-transitions"),
    path("workflow", apis.WorkflowApi.as_view(), name="workflow"),
    path("agents/<str:role>/in-flight", apis.InFlightApi.as_view(), name="agent-in-flight"),
]
