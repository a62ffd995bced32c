from django.apps import AppConfig


class BrainConfig(AppConfig):
    name = "brain"
    verbose_name = "Brain"
