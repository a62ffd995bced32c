from django.apps import AppConfig


class BrainConfig(AppConfig):
    name = "brain"
    verbose_name = "Brain"

    def ready(self) -> None:
        # core sits below brain: the health body learns the embedding model from here.
        from brain.embedding import current_model_label, health_embedding, public_text
        from core.health import health_register

        health_register("embedding_model", lambda: {"embedding_model": public_text(current_model_label())})
        # Advisory (never makes the status an error): stored vectors from another embedder.
        health_register("embedding", lambda: {"embedding": health_embedding()}, needs_database=True)
        from core.metrics import metrics_register_gauge

        metrics_register_gauge(
            "colony_thoughts_waiting_embedding", "Thoughts stored without a vector yet.", _thoughts_waiting_embedding
        )


def _thoughts_waiting_embedding() -> int:
    from brain.models import Thought

    return Thought.objects.filter(embedding__isnull=True).count()
