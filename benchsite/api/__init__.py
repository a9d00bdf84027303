"""The REST API: ``site`` (one NinjaAPI at /api/, one router per app), ``common`` (pagination,
safe text, CSV) and ``errors`` (error bodies and handlers). Imports nothing here.
"""
