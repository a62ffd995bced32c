from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Spaces and agents"

    def ready(self):
        from api import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from core.logging import install_access_log_masking

        install_access_log_masking()
        from django.core import checks

        from core.metrics import connect_celery_signals, metrics_open_to_a_proxy_check

        connect_celery_signals()
        checks.register(metrics_open_to_a_proxy_check, checks.Tags.security, deploy=True)
        from django.db.backends.signals import connection_created

        from core.db import register_binary_adapters

        connection_created.connect(register_binary_adapters, dispatch_uid="colony-binary-adapters")
        from django.db.models.signals import post_delete, post_save

        from core.models import Agent, AgentToken, Space
        from core.services import token_rows

        for model in (AgentToken, Agent, Space):  # what a cached token row holds (core.services.TokenRows)
            for name, signal in (("save", post_save), ("delete", post_delete)):
                signal.connect(
                    token_rows.clear, sender=model, dispatch_uid=f"colony-token-rows-{name}-{model.__name__}"
                )
