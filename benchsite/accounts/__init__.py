"""Access control: reader accounts, API tokens (``auth``), the audit log of who launched,
cancelled or retried what (``services.audit_event_record``), and their admin and pages."""
