from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Tasks"

    def ready(self) -> None:
        # Open tasks' memory gates read their memory_query_session's query-log rows: the retention
        # keeps those (brain.services.pheromones.query_logs_expire).
        from brain.services.pheromones import QUERY_LOG_KEEPERS
        from core.selectors import TEXT_FINDERS
        from tasks.selectors import task_memory_sessions_open, tasks_naming

        if task_memory_sessions_open not in QUERY_LOG_KEEPERS:
            QUERY_LOG_KEEPERS.append(task_memory_sessions_open)
        # Agents read task titles and DNA (hooks, tools): feedback copied from them counts for nothing.
        if tasks_naming not in TEXT_FINDERS:
            TEXT_FINDERS.append(tasks_naming)
