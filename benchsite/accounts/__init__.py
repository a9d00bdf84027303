"""Access control: who may read and write what (``access``: the one permission model of the
pages, the admin and the API), reader accounts, API tokens (``auth``), the audit log of who
launched, cancelled or retried what (``services.audit_event_record``), and their admin and
pages. May import Django and ``benchsite.api``; never ``runs`` or ``tasks_app``, which both
import it."""
