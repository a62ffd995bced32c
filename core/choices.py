from django.db import models


class AgentRole(models.TextChoices):
    PDSA = "pdsa", "PDSA"
    DEV = "dev", "Developer"
    QA = "qa", "QA"
    LIAISON = "liaison", "Liaison"
    ORCHESTRATOR = "orchestrator", "Orchestrator"


DEFAULT_ROLES = [AgentRole.PDSA, AgentRole.DEV, AgentRole.QA, AgentRole.LIAISON]

#: Other names for the roles, for an unknown role's "Did you mean ...?" (never taken in its place).
ROLE_SYNONYMS = {
    **dict.fromkeys(("developer", "engineer", "coder", "programmer", "devs"), "dev"),
    **dict.fromkeys(("tester", "testing", "quality"), "qa"),
    **dict.fromkeys(("planner", "pm", "product", "architect", "pdca", "plan"), "pdsa"),
    **dict.fromkeys(("human", "support", "contact", "liason"), "liaison"),
}
DEFAULT_SPACE_SLUG = "default"
