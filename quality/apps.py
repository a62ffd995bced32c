from django.apps import AppConfig


class QualityConfig(AppConfig):
    name = "quality"
    verbose_name = "Quality loop"

    def ready(self) -> None:
        # A thought retracted with redact loses its text here too: the turn items' excerpts of it.
        from brain.services.retraction import REDACTION_HOOKS
        from quality.services.turns import turn_items_redact

        if turn_items_redact not in REDACTION_HOOKS:
            REDACTION_HOOKS.append(turn_items_redact)
