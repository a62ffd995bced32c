from django.db import models


class AgentRole(models.TextChoices):
    PDSA = "pdsa", "PDSA"
    DEV = "dev", "Developer"
    QA = "qa", "QA"
    LIAISON = "liaison", "Liaison"
    ORCHESTRATOR = "orchestrator", "Orchestrator"


DEFAULT_ROLES = [AgentRole.PDSA, AgentRole.DEV, AgentRole.QA, AgentRole.LIAISON]
DEFAULT_SPACE_SLUG = "default"
