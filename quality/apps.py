from django.apps import AppConfig


class QualityConfig(AppConfig):
    name = "quality"
    verbose_name = "Quality loop"

    def ready(self) -> None:
        # A thought retracted with redact loses its text here too: the turn items' excerpts of it, and its
        # copies in the turn log (the author's turns; every turn of the space for a human's redaction).
        from brain.services.retraction import REDACTION_HOOKS, REDACTION_SWEEPS
        from quality.services.turns import turn_items_redact, turns_redact_texts

        if turn_items_redact not in REDACTION_HOOKS:
            REDACTION_HOOKS.append(turn_items_redact)
        if turns_redact_texts not in REDACTION_SWEEPS:
            REDACTION_SWEEPS.append(turns_redact_texts)
