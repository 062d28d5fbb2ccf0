"""Webhooks: an adapter's messages pushed to an HTTPS endpoint (docs/exchange.md, "Webhooks").

``signing`` writes the Standard Webhooks signature, ``targets`` decides which addresses a push may
reach, ``delivery`` is the process that pushes (in every server process, or on its own:
``manage.py deliver_webhooks``); the owner's side is exchange/services/webhooks.py and its SQL
exchange/webhook_queries.py.
"""
