"""Per-command facts as data: how each BaseCommand type is matched and what its summary shows.

ROLES maps a command type to (role, key name, key fields). Roles:
  request   a request; its key (key name + field values) waits for a response
  response  pops the key of its request
  update    pops the key if a request waits (the first answer), else a server push (event)
  oneway    a request that gets no response by design
  event     a server push
  close     client -> broker: a request; broker -> client: a push (forced close, no response)
CONNECT, CONNECTED, AUTH_*, PING, PONG, ACK, ACK_RESPONSE, ERROR and SEND* are matched in match.py.
"""

from __future__ import annotations

from kdissect.pulsar.schema_table import ENUMS, MESSAGES

TYPE_NAMES: dict[int, str] = ENUMS["BaseCommand.Type"]
TYPE_CODES: dict[str, int] = {v: k for k, v in TYPE_NAMES.items()}
# Type value -> (BaseCommand field name of its body, body message name)
BODY: dict[int, tuple[str, str]] = {n: (e[0], e[2]) for n, e in MESSAGES["BaseCommand"].items() if n != 1}

_REQ = ("req", ("request_id",))
_REQUESTS = (
    "SUBSCRIBE", "PRODUCER", "UNSUBSCRIBE", "PARTITIONED_METADATA", "LOOKUP", "CONSUMER_STATS", "SEEK",
    "GET_LAST_MESSAGE_ID", "GET_TOPICS_OF_NAMESPACE", "GET_SCHEMA", "GET_OR_CREATE_SCHEMA", "NEW_TXN",
    "ADD_PARTITION_TO_TXN", "ADD_SUBSCRIPTION_TO_TXN", "END_TXN", "END_TXN_ON_PARTITION",
    "END_TXN_ON_SUBSCRIPTION", "TC_CLIENT_CONNECT_REQUEST", "WATCH_TOPIC_LIST", "WATCH_TOPIC_LIST_CLOSE",
    "SCALABLE_TOPIC_SUBSCRIBE",
)
_RESPONSES = (
    "SUCCESS", "ERROR", "PRODUCER_SUCCESS", "PARTITIONED_METADATA_RESPONSE", "LOOKUP_RESPONSE",
    "CONSUMER_STATS_RESPONSE", "GET_LAST_MESSAGE_ID_RESPONSE", "GET_TOPICS_OF_NAMESPACE_RESPONSE",
    "GET_SCHEMA_RESPONSE", "GET_OR_CREATE_SCHEMA_RESPONSE", "NEW_TXN_RESPONSE",
    "ADD_PARTITION_TO_TXN_RESPONSE", "ADD_SUBSCRIPTION_TO_TXN_RESPONSE", "END_TXN_RESPONSE",
    "END_TXN_ON_PARTITION_RESPONSE", "END_TXN_ON_SUBSCRIPTION_RESPONSE", "TC_CLIENT_CONNECT_RESPONSE",
    "WATCH_TOPIC_LIST_SUCCESS", "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE",
)

# A request with a request_id waits for the response type named here (default SUCCESS) or for an
# ERROR: the key carries that type, because one connection may run several request-id
# sequences at once (the C++ client numbers lookups apart from producers and consumers).
ANSWER: dict[str, str] = {
    "PRODUCER": "PRODUCER_SUCCESS",
    "PARTITIONED_METADATA": "PARTITIONED_METADATA_RESPONSE",
    "LOOKUP": "LOOKUP_RESPONSE",
    "CONSUMER_STATS": "CONSUMER_STATS_RESPONSE",
    "GET_LAST_MESSAGE_ID": "GET_LAST_MESSAGE_ID_RESPONSE",
    "GET_TOPICS_OF_NAMESPACE": "GET_TOPICS_OF_NAMESPACE_RESPONSE",
    "GET_SCHEMA": "GET_SCHEMA_RESPONSE",
    "GET_OR_CREATE_SCHEMA": "GET_OR_CREATE_SCHEMA_RESPONSE",
    "NEW_TXN": "NEW_TXN_RESPONSE",
    "ADD_PARTITION_TO_TXN": "ADD_PARTITION_TO_TXN_RESPONSE",
    "ADD_SUBSCRIPTION_TO_TXN": "ADD_SUBSCRIPTION_TO_TXN_RESPONSE",
    "END_TXN": "END_TXN_RESPONSE",
    "END_TXN_ON_PARTITION": "END_TXN_ON_PARTITION_RESPONSE",
    "END_TXN_ON_SUBSCRIPTION": "END_TXN_ON_SUBSCRIPTION_RESPONSE",
    "TC_CLIENT_CONNECT_REQUEST": "TC_CLIENT_CONNECT_RESPONSE",
    "WATCH_TOPIC_LIST": "WATCH_TOPIC_LIST_SUCCESS",
    "SCALABLE_TOPIC_SUBSCRIBE": "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE",
}
ANSWER_TYPES: tuple[str, ...] = ("SUCCESS", *dict.fromkeys(ANSWER.values()))

Role = tuple[str, str, tuple[str, ...]]

ROLES: dict[str, Role] = {
    **{t: ("request", *_REQ) for t in _REQUESTS},
    **{t: ("response", *_REQ) for t in _RESPONSES},
    "CLOSE_PRODUCER": ("close", *_REQ),
    "CLOSE_CONSUMER": ("close", *_REQ),
    "FLOW": ("oneway", "", ()),
    "REDELIVER_UNACKNOWLEDGED_MESSAGES": ("oneway", "", ()),
    "SCALABLE_TOPIC_CLOSE": ("oneway", "", ()),
    "WATCH_SCALABLE_TOPICS_CLOSE": ("oneway", "", ()),
    "WATCH_TC_ASSIGNMENTS_CLOSE": ("oneway", "", ()),
    "MESSAGE": ("event", "", ()),
    "REACHED_END_OF_TOPIC": ("event", "", ()),
    "ACTIVE_CONSUMER_CHANGE": ("event", "", ()),
    "WATCH_TOPIC_UPDATE": ("event", "", ()),
    "TOPIC_MIGRATED": ("event", "", ()),
    "SCALABLE_TOPIC_ASSIGNMENT_UPDATE": ("event", "", ()),
    "SCALABLE_TOPIC_LOOKUP": ("request", "scalable", ("session_id",)),
    "SCALABLE_TOPIC_UPDATE": ("update", "scalable", ("session_id",)),
    "WATCH_SCALABLE_TOPICS": ("request", "watch_scalable", ("watch_id",)),
    "WATCH_SCALABLE_TOPICS_UPDATE": ("update", "watch_scalable", ("watch_id",)),
    "WATCH_TC_ASSIGNMENTS": ("request", "watch_tc", ("watch_id",)),
    "WATCH_TC_ASSIGNMENTS_UPDATE": ("update", "watch_tc", ("watch_id",)),
}

# Command fields (dotted paths) a summary shows, in order; "topic"-like values are shown bare, others as name=value.
SUMMARY_FIELDS: dict[str, tuple[str, ...]] = {
    "SUBSCRIBE": ("topic", "subscription", "sub_type", "consumer_id", "consumer_name"),
    "PRODUCER": ("topic", "producer_id", "producer_name"),
    "PRODUCER_SUCCESS": ("producer_name", "last_sequence_id"),
    "SEND_RECEIPT": ("producer_id", "sequence_id", "message_id"),
    "SEND_ERROR": ("producer_id", "sequence_id"),
    "ACK": ("consumer_id", "ack_type", "message_id"),
    "ACK_RESPONSE": ("consumer_id",),
    "FLOW": ("consumer_id", "message_permits"),
    "UNSUBSCRIBE": ("consumer_id",),
    "SEEK": ("consumer_id", "message_id", "message_publish_time"),
    "CLOSE_PRODUCER": ("producer_id",),
    "CLOSE_CONSUMER": ("consumer_id",),
    "REDELIVER_UNACKNOWLEDGED_MESSAGES": ("consumer_id",),
    "PARTITIONED_METADATA": ("topic",),
    "LOOKUP": ("topic",),
    "CONSUMER_STATS": ("consumer_id",),
    "CONSUMER_STATS_RESPONSE": ("consumer_name", "msg_backlog"),
    "REACHED_END_OF_TOPIC": ("consumer_id",),
    "GET_LAST_MESSAGE_ID": ("consumer_id",),
    "GET_LAST_MESSAGE_ID_RESPONSE": ("last_message_id",),
    "ACTIVE_CONSUMER_CHANGE": ("consumer_id", "is_active"),
    "GET_TOPICS_OF_NAMESPACE": ("namespace", "mode", "topics_pattern"),
    "AUTH_CHALLENGE": ("challenge.auth_method_name",),
    "AUTH_RESPONSE": ("response.auth_method_name",),
    "GET_TOPICS_OF_NAMESPACE_RESPONSE": ("topics", "filtered"),
    "GET_SCHEMA": ("topic",),
    "GET_SCHEMA_RESPONSE": ("schema",),
    "GET_OR_CREATE_SCHEMA": ("topic",),
    "NEW_TXN": ("tc_id", "txn_ttl_millis"),
    "ADD_PARTITION_TO_TXN": ("partitions",),
    "END_TXN": ("txn_action",),
    "END_TXN_ON_PARTITION": ("topic", "txn_action"),
    "END_TXN_ON_SUBSCRIPTION": ("txn_action",),
    "TC_CLIENT_CONNECT_REQUEST": ("tc_id",),
    "WATCH_TOPIC_LIST": ("namespace", "topics_pattern", "watcher_id"),
    "WATCH_TOPIC_LIST_SUCCESS": ("watcher_id",),
    "WATCH_TOPIC_UPDATE": ("watcher_id",),
    "WATCH_TOPIC_LIST_CLOSE": ("watcher_id",),
    "TOPIC_MIGRATED": ("resource_type", "resource_id", "broker_service_url"),
    "SCALABLE_TOPIC_LOOKUP": ("topic", "session_id"),
    "SCALABLE_TOPIC_UPDATE": ("resolved_topic_name", "session_id"),
    "SCALABLE_TOPIC_CLOSE": ("session_id",),
    "SCALABLE_TOPIC_SUBSCRIBE": ("topic", "subscription", "consumer_id"),
    "SCALABLE_TOPIC_ASSIGNMENT_UPDATE": ("consumer_id",),
    "WATCH_SCALABLE_TOPICS": ("namespace", "watch_id"),
    "WATCH_SCALABLE_TOPICS_UPDATE": ("watch_id",),
    "WATCH_SCALABLE_TOPICS_CLOSE": ("watch_id",),
    "WATCH_TC_ASSIGNMENTS": ("watch_id",),
    "WATCH_TC_ASSIGNMENTS_UPDATE": ("watch_id",),
    "WATCH_TC_ASSIGNMENTS_CLOSE": ("watch_id",),
}
BARE_FIELDS = frozenset({"topic", "namespace", "resolved_topic_name"})

# Where a command carries its error: (error enum field, error text field).
ERROR_FIELDS: tuple[tuple[str, str], ...] = (("error", "message"), ("error_code", "error_message"))

# Secrets hidden unless Options.show_secrets: (message, field).
SECRETS: frozenset[tuple[str, str]] = frozenset({
    ("CommandConnect", "auth_data"),
    ("CommandConnect", "original_auth_data"),
    ("AuthData", "auth_data"),
    ("CommandLookupTopic", "original_auth_data"),
    ("CommandPartitionedTopicMetadata", "original_auth_data"),
})

# Commands that carry auth data (the types of SECRETS' messages): their undecoded bytes are
# redacted unless show_secrets.
CREDENTIAL_COMMANDS = frozenset({"CONNECT", "AUTH_CHALLENGE", "AUTH_RESPONSE", "LOOKUP", "PARTITIONED_METADATA"})
