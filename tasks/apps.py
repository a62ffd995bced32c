from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Tasks"

    def ready(self) -> None:
        # Open tasks' memory gates read their memory_query_session's query-log rows: the retention
        # keeps those (brain.services.pheromones.query_logs_expire).
        from brain.services.pheromones import QUERY_LOG_KEEPERS
        from tasks.selectors import task_memory_sessions_open

        if task_memory_sessions_open not in QUERY_LOG_KEEPERS:
            QUERY_LOG_KEEPERS.append(task_memory_sessions_open)
