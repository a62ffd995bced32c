from config.celery import app as celery_app  # noqa: F401  (binds shared_task jobs to this app)

__all__ = ["celery_app"]
