"""Colony's API framework: the error envelope and its bounds, strict fields and parsers, paging, the
OpenAPI helpers, responses, the request guards (host, input, per-route body limit). No models: it sits
below every app."""
