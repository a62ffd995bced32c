"""How tasks, projects and transitions look on the outside: the one shape the API and the
``manage.py task`` CLI both print, so neither imports the other."""

from __future__ import annotations

from rest_framework import serializers

from api.fields import FieldsReusedPerThread
from tasks import selectors

DETAIL_TRANSITIONS = 10
"""A task's detail shows this many of its latest transitions."""


class ProjectOutputSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    approval_mode = serializers.CharField()
    created_at = serializers.DateTimeField()


# Task and transition outputs are built on every task request: their fields are kept per thread
# (api.fields.FieldsReusedPerThread; each instance is built, read and dropped in turn).
class TransitionOutputSerializer(FieldsReusedPerThread, serializers.Serializer):
    id = serializers.IntegerField()
    rule = serializers.CharField(source="rule_key")
    from_status = serializers.CharField()
    to_status = serializers.CharField()
    actor = serializers.CharField()
    agent = serializers.CharField(source="agent.name", default=None)
    user = serializers.CharField(source="user.username", default=None)
    role_before = serializers.CharField()
    role_after = serializers.CharField()
    dna_diff = serializers.SerializerMethodField(
        help_text='{"added": {k: v}, "removed": {k: v}, "changed": {k: [before, after]}}; when dna_diff_truncated, '
        '{"added": [k], "removed": [k], "changed": [k], "keys_left_out": n}: the keys (at most 20 of each), '
        "since the diff is too large to list (the task's DNA holds what it is now)."
    )
    dna_diff_truncated = serializers.SerializerMethodField()
    summary = serializers.CharField()
    marker_id = serializers.UUIDField()
    marker = serializers.CharField(source="marker.content")
    created_at = serializers.DateTimeField()

    # A listed transition was read by tasks.selectors.with_dna_diff_shown; a transition's own answer
    # has the diff it just wrote.
    def get_dna_diff(self, log) -> dict:
        if not hasattr(log, "dna_diff_keys"):
            return log.dna_diff
        return log.dna_diff_keys if log.dna_diff_whole is None else log.dna_diff_whole

    def get_dna_diff_truncated(self, log) -> bool:
        return hasattr(log, "dna_diff_keys") and log.dna_diff_whole is None


class TaskOutputSerializer(FieldsReusedPerThread, serializers.Serializer):
    id = serializers.UUIDField()
    slug = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField()
    type = serializers.CharField()
    status = serializers.CharField()
    role = serializers.CharField()
    project = serializers.CharField(source="project.slug")
    approval_mode = serializers.CharField(source="project.approval_mode")
    dna = serializers.JSONField()
    parent_ids = serializers.SerializerMethodField()
    depends_on = serializers.SerializerMethodField()
    status_changed_at = serializers.DateTimeField()
    blocked_from_status = serializers.CharField()
    blocked_from_role = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_parent_ids(self, task) -> list[str]:
        return sorted(t.slug for t in task.parents.all())

    def get_depends_on(self, task) -> list[dict]:
        return sorted(({"slug": t.slug, "status": t.status} for t in task.depends_on.all()), key=lambda d: d["slug"])


def task_output(task) -> dict:
    return dict(TaskOutputSerializer(task).data)


def transition_output(log) -> dict:
    return dict(TransitionOutputSerializer(log).data)


def task_detail_output(task) -> dict:
    """A task with its last transitions: the one shape the API and ``manage.py task get`` both show."""
    recent = selectors.transitions_recent(task_ids=[task.id], per_task=DETAIL_TRANSITIONS)[task.id]
    return {**TaskOutputSerializer(task).data, "transitions": TransitionOutputSerializer(recent, many=True).data}
