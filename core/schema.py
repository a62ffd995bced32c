"""OpenAPI: describe the agent token authentication as an HTTP bearer scheme."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "core.auth.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An agent token: `manage.py agent create`."}
