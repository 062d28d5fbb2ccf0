"""A received message as the SQL writes it (exchange/queries.py's claim, a webhook's push in
exchange/webhook_queries.py): its members, and the one concat() that renders them."""

# A received message, as receive, an ACK that receives and the stream deliver it: its members in
# order, each with the SQL that writes its JSON value from the claimed row (m). The one definition
# of that shape: exchange/queries.py's claim renders it, exchange.api.serializers.DeliveryOutput
# (the schema) is built from these names, and the stream's events carry the same JSON.
DELIVERY_MEMBERS = (
    # (name, the SQL of its value, whether the value is a JSON string the SQL writes unquoted)
    ("messageId", "m.message_id", True),
    # base64url(message_id || lease_token), unpadded: services.leases.receipt_parse reads it.
    (
        "receiptHandle",
        """translate(
            rtrim(encode(uuid_send(m.message_id) || uuid_send(m.lease_token), 'base64'), '='),
            '+/', '-_'
        )""",
        True,
    ),
    ("deliveryCount", "m.receive_count", False),
    ("redelivered", "CASE WHEN m.receive_count > 1 THEN 'true' ELSE 'false' END", False),
    (
        "enqueuedAt",
        """to_char(m.enqueued_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')""",
        True,
    ),
    (
        "leaseExpiresAt",
        """to_char(m.visible_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')""",
        True,
    ),
    ("sender", "coalesce(m.sender_id::text, 'null')", False),
    # A topic's copy: its topic and publication (docs/exchange.md, "Topics"); else both null.
    ("topicId", "coalesce(m.topic_id::text, 'null')", False),
    ("publicationId", """coalesce('"' || m.publication_id || '"', 'null')""", False),
    ("type", "to_json(m.type)", False),
    ("headers", "m.headers", False),
    # A copy's payload is its publication's: looked up by its key, and only for a copy
    # (coalesce stops at its first value that is not NULL).
    (
        "payload",
        """coalesce(m.payload, (SELECT p.payload FROM exchange_publication p
                                WHERE p.publication_id = m.publication_id))""",
        False,
    ),
)


def delivery_json(*, count: str = "m.receive_count") -> str:
    """One concat() whose literal pieces carry the names, commas and a string's quotes, and whose
    other arguments are the values: no text is joined twice per row. ``count`` is the column the
    delivery is counted in (a webhook's push: m.push_attempts)."""
    parts: list[str] = []
    literal = "{"
    for name, sql, quoted in DELIVERY_MEMBERS:
        literal += ("," if literal != "{" else "") + f'"{name}":' + ('"' if quoted else "")
        parts += [f"'{literal}'", sql.replace("m.receive_count", count)]
        literal = '"' if quoted else ""
    parts.append(f"'{literal}}}'")
    return "concat(" + ", ".join(parts) + ")"
