from django.contrib import admin, messages

from benchsite.accounts.models import ApiToken, AuditEvent, Door
from benchsite.accounts.services import api_token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "user", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    list_select_related = ["user"]
    search_fields = ["prefix", "name", "user__username"]
    # The token itself is never stored; revoking goes through the service (and the audit log).
    readonly_fields = [
        "public_id",
        "user",
        "name",
        "prefix",
        "token_hash",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        tokens = list(queryset.filter(revoked_at__isnull=True))
        for token in tokens:
            api_token_revoke(token=token, by=request.user, door=Door.ADMIN, request=request)
        self.message_user(request, f"Revoked {len(tokens)} token(s).", messages.SUCCESS)

    def has_add_permission(self, request) -> bool:
        return False  # tokens are issued on /account/tokens/ or through the API, shown once


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "actor_name", "action", "via", "object_type", "ip"]
    list_filter = ["action", "via"]
    search_fields = ["actor_name", "object_ids", "ip"]
    date_hierarchy = "created_at"
    readonly_fields = [
        "actor",
        "actor_name",
        "token",
        "action",
        "via",
        "object_type",
        "object_ids",
        "details",
        "ip",
        "created_at",
    ]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the log is append-only
