from django.apps import AppConfig


class BrainConfig(AppConfig):
    name = "brain"
    verbose_name = "Brain"

    def ready(self) -> None:
        # core sits below brain: the health body learns the embedding model from here.
        from brain.embedding import current_model_label
        from core.health import health_register

        health_register("embedding_model", lambda: {"embedding_model": current_model_label()})
