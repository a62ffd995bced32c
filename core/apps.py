from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Spaces and agents"

    def ready(self):
        from core import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from core.logging import install_access_log_masking

        install_access_log_masking()
        from core.metrics import connect_celery_signals

        connect_celery_signals()
        from django.db.backends.signals import connection_created

        from core.db import register_binary_jsonb

        connection_created.connect(register_binary_jsonb, dispatch_uid="colony-binary-jsonb")
