from django.apps import AppConfig


class BrainConfig(AppConfig):
    name = "brain"
    verbose_name = "Brain"

    def ready(self) -> None:
        # core sits below brain: the health body learns the embedding model from here.
        from brain.embedding import current_model_label, health_embedding
        from core.health import health_register

        health_register("embedding_model", lambda: {"embedding_model": current_model_label()})
        # Advisory (never makes the status an error): stored vectors from another embedder.
        health_register("embedding", lambda: {"embedding": health_embedding()})
