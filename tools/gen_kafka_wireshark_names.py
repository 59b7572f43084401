"""Generate kdissect/kafka/wireshark_names.py: Wireshark's Kafka field names as aliases of
kdissect's keys.

The names, types and descriptions are read from Wireshark's field registrations as
`tshark -G fields` lists them (the rows of the `kafka` protocol); MAPPING below says which
kdissect key(s) each one means. A Wireshark field MAPPING leaves out has no kdissect
counterpart and is listed in UNMAPPED; expert items (type FT_NONE) are diagnostics, not fields,
and are left out.

    python tools/gen_kafka_wireshark_names.py            # runs tshark -G fields
    python tools/gen_kafka_wireshark_names.py FILE       # reads a saved `tshark -G fields`

Target forms (resolved by the display-filter layer against `kdissect fields kafka`):
`path` (a key path below `kafka.`), `*.suffix` (every key whose path ends with the suffix,
the suffix itself included), `info:key` (the info fact). A kind of "request" or "response"
restricts the alias to those messages.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "kdissect" / "kafka" / "wireshark_names.py"

# Wireshark abbrev -> (kind, targets)
MAPPING: dict[str, tuple[str, tuple[str, ...]]] = {
    "kafka.len": ("", ("length",)),
    "kafka.offset": ("", ("*.offset", "*.base_offset", "*.committed_offset", "*.fetch_offset")),
    "kafka.offset_time": ("", ("*.partitions.timestamp",)),
    "kafka.log_start_offset": ("", ("*.log_start_offset",)),
    "kafka.last_stable_offset": ("", ("*.last_stable_offset",)),
    "kafka.first_offset": ("", ("*.first_offset",)),
    "kafka.max_offsets": ("", ("*.max_num_offsets",)),
    "kafka.metadata": ("", ("*.committed_metadata", "*.partitions.metadata")),
    "kafka.error": ("", ("*.error_code",)),
    "kafka.error_message": ("", ("*.error_message",)),
    "kafka.api_key": ("", ("info:op_code",)),
    "kafka.api_version": ("", ("info:version",)),
    "kafka.request_key": ("request", ("info:op_code",)),
    "kafka.response_key": ("response", ("info:op_code",)),
    "kafka.request.version": ("request", ("info:version",)),
    "kafka.response.version": ("response", ("info:version",)),
    "kafka.correlation_id": ("", ("header.correlation_id",)),
    "kafka.client_id": ("", ("header.client_id",)),
    "kafka.client_host": ("", ("*.client_host",)),
    "kafka.transactional_id": ("", ("*.transactional_id",)),
    "kafka.transaction_result": ("", ("*.transaction_result",)),
    "kafka.transaction_timeout": ("", ("*.transaction_timeout_ms",)),
    "kafka.required_acks": ("", ("acks",)),
    "kafka.timeout": ("", ("*.timeout_ms",)),
    "kafka.topic_name": ("", ("*.topics.name", "*.topic_data.name", "*.responses.name", "*.responses.topic",
                              "*.topics.topic", "*.topic_partitions.topic", "*.forgotten_topics_data.topic",
                              "*.topic_results.name", "*.v3_and_below_topics.name", "*.topic_name")),
    "kafka.producer_id": ("", ("*.producer_id",)),
    "kafka.producer_epoch": ("", ("*.producer_epoch",)),
    "kafka.partition_id": ("", ("*.partition_index", "*.partition_data.index", "*.partition_responses.index",
                                "*.partitions.index", "*.partitions.partition", "*.partition_id")),
    "kafka.replica_id": ("", ("*.replica_id", "*.replicas", "*.replica_nodes")),
    "kafka.replication_factor": ("", ("*.replication_factor",)),
    "kafka.isr_id": ("", ("*.isr", "*.isr_nodes")),
    "kafka.offline_id": ("", ("*.offline_replicas",)),
    "kafka.message_size": ("", ("*.records.message_size",)),
    "kafka.message_crc": ("", ("*.records.records.crc",)),
    "kafka.message_magic": ("", ("*.records.magic", "*.records.records.magic")),
    "kafka.batch_crc": ("", ("*.records.crc",)),
    "kafka.batch_codec": ("", ("*.records.attributes",)),
    "kafka.batch_last_offset_delta": ("", ("*.records.last_offset_delta",)),
    "kafka.batch_first_timestamp": ("", ("*.records.base_timestamp",)),
    "kafka.batch_last_timestamp": ("", ("*.records.max_timestamp",)),
    "kafka.batch_base_sequence": ("", ("*.records.base_sequence",)),
    "kafka.batch_size": ("", ("*.records.records_count",)),
    "kafka.batch_index": ("", ("*.batch_index",)),
    "kafka.batch_index_error_message": ("", ("*.batch_index_error_message",)),
    "kafka.message_timestamp": ("", ("*.records.timestamp", "*.records.records.timestamp")),
    "kafka.message_key": ("", ("*.records.key", "*.records.records.key")),
    "kafka.message_value": ("", ("*.records.value", "*.records.records.value")),
    "kafka.consumer_group": ("", ("group_id", "*.groups.group_id", "*.group_ids", "*.groups_names",
                                  "*.coordinator_keys")),
    "kafka.consumer_group_instance": ("", ("*.group_instance_id",)),
    "kafka.coordinator_key": ("", ("key", "*.coordinator_keys", "*.coordinators.key")),
    "kafka.coordinator_type": ("", ("key_type",)),
    "kafka.node_id": ("", ("*.node_id", "*.broker_id")),
    "kafka.broker_epoch": ("", ("*.broker_epoch",)),
    "kafka.host": ("", ("*.host",)),
    "kafka.listener_name": ("", ("*.listener", "*.listeners.name")),
    "kafka.port": ("", ("*.port",)),
    "kafka.rack": ("", ("*.rack",)),
    "kafka.broker_security_protocol_type": ("", ("*.security_protocol",)),
    "kafka.cluster_id": ("", ("*.cluster_id",)),
    "kafka.controller_epoch": ("", ("*.controller_epoch",)),
    "kafka.delete_partitions": ("", ("*.delete_partitions", "*.delete_partition")),
    "kafka.group_leader_id": ("", ("leader",)),
    "kafka.leader_id": ("", ("*.leader_id", "*.partition_states.leader", "*.partitions.leader")),
    "kafka.leader_epoch": ("", ("*.leader_epoch",)),
    "kafka.current_leader_epoch": ("", ("*.current_leader_epoch",)),
    "kafka.is_internal": ("", ("*.is_internal",)),
    "kafka.min_bytes": ("", ("min_bytes",)),
    "kafka.max_bytes": ("", ("max_bytes", "*.partition_max_bytes")),
    "kafka.isolation_level": ("", ("isolation_level",)),
    "kafka.max_wait_time": ("", ("max_wait_ms",)),
    "kafka.throttle_time": ("", ("throttle_time_ms",)),
    "kafka.request_frame": ("response", ("kdissect.match_frame",)),
    "kafka.response_frame": ("request", ("kdissect.match_frame",)),
    "kafka.api_versions.api_key": ("", ("api_keys.api_key",)),
    "kafka.api_versions.min_version": ("", ("api_keys.min_version",)),
    "kafka.api_versions.max_version": ("", ("api_keys.max_version",)),
    "kafka.session_timeout": ("", ("*.session_timeout_ms",)),
    "kafka.rebalance_timeout": ("", ("*.rebalance_timeout_ms",)),
    "kafka.group_state": ("", ("*.group_state",)),
    "kafka.member_id": ("", ("*.member_id",)),
    "kafka.protocol_type": ("", ("*.protocol_type",)),
    "kafka.protocol_name": ("", ("*.protocol_name", "*.protocols.name")),
    "kafka.protocol_metadata": ("", ("*.protocols.metadata",)),
    "kafka.member_metadata": ("", ("*.members.metadata", "*.member_metadata")),
    "kafka.generation_id": ("", ("*.generation_id",)),
    "kafka.member_assignment": ("", ("*.assignment", "*.member_assignment")),
    "kafka.sasl_mechanism": ("", ("mechanism", "mechanisms")),
    "kafka.num_partitions": ("", ("*.num_partitions",)),
    "kafka.zk_version": ("", ("*.zk_version",)),
    "kafka.is_new_replica": ("", ("*.is_new",)),
    "kafka.config_key": ("", ("*.configs.name", "*.configuration_keys")),
    "kafka.config_value": ("", ("*.configs.value",)),
    "kafka.config_operation": ("", ("*.config_operation",)),
    "kafka.commit_timestamp": ("", ("*.commit_timestamp",)),
    "kafka.retention_time": ("", ("*.retention_time_ms",)),
    "kafka.forgotten_topic_name": ("", ("*.forgotten_topics_data.topic",)),
    "kafka.forgotten_topic_partition": ("", ("*.forgotten_topics_data.partitions",)),
    "kafka.fetch_session_id": ("", ("session_id",)),
    "kafka.fetch_session_epoch": ("", ("session_epoch",)),
    "kafka.require_stable_offset": ("", ("require_stable",)),
    "kafka.header_key": ("", ("*.records.headers.key",)),
    "kafka.header_value": ("", ("*.records.headers.value",)),
    "kafka.record_attributes": ("", ("*.records.records.attributes",)),
    "kafka.allow_auto_topic_creation": ("", ("allow_auto_topic_creation",)),
    "kafka.validate_only": ("", ("*.validate_only",)),
    "kafka.coordinator_epoch": ("", ("*.coordinator_epoch",)),
    "kafka.sasl_authentication": ("", ("auth_bytes",)),
    "kafka.session_lifetime_ms": ("", ("session_lifetime_ms",)),
    "kafka.acl_resource_type": ("", ("*.resource_type_filter", "*.creations.resource_type",
                                     "*.matching_acls.resource_type", "resources.resource_type")),
    "kafka.acl_resource_name": ("", ("*.resource_name_filter", "*.creations.resource_name",
                                     "*.matching_acls.resource_name", "resources.resource_name")),
    "kafka.acl_resource_pattern_type": ("", ("*.pattern_type_filter", "*.resource_pattern_type",
                                             "*.pattern_type")),
    "kafka.acl_principal": ("", ("*.principal_filter", "*.principal")),
    "kafka.acl_host": ("", ("*.host_filter", "*.acls.host", "*.creations.host", "*.matching_acls.host")),
    "kafka.acl_operation": ("", ("*.operation",)),
    "kafka.acl_permission_type": ("", ("*.permission_type",)),
    "kafka.config_resource_type": ("", ("*.resources.resource_type", "*.results.resource_type",
                                        "*.config_resources.resource_type", "*.responses.resource_type")),
    "kafka.config_resource_name": ("", ("*.resources.resource_name", "*.results.resource_name",
                                        "*.config_resources.resource_name", "*.responses.resource_name")),
    "kafka.config_include_synonyms": ("", ("include_synonyms",)),
    "kafka.config_default": ("", ("*.is_default",)),
    "kafka.config_readonly": ("", ("*.read_only",)),
    "kafka.config_sensitive": ("", ("*.is_sensitive",)),
    "kafka.config_source": ("", ("*.config_source",)),
    "kafka.log_dir": ("", ("*.log_dir", "*.path")),
    "kafka.segment_size": ("", ("*.partition_size",)),
    "kafka.offset_lag": ("", ("*.offset_lag",)),
    "kafka.future": ("", ("*.is_future_key",)),
    "kafka.partition_count": ("", ("*.count",)),
    "kafka.token_max_life_time": ("", ("max_lifetime_ms",)),
    "kafka.renew_time": ("", ("renew_period_ms",)),
    "kafka.expiry_time": ("", ("expiry_time_period_ms",)),
    "kafka.principal_type": ("", ("*.principal_type", "*.owner_principal_type")),
    "kafka.principal_name": ("", ("*.principal_name", "*.owner_principal_name")),
    "kafka.token_issue_timestamp": ("", ("*.issue_timestamp_ms", "*.issue_timestamp")),
    "kafka.token_expiry_timestamp": ("", ("*.expiry_timestamp_ms", "*.expiry_timestamp")),
    "kafka.token_max_timestamp": ("", ("*.max_timestamp_ms", "*.tokens.max_timestamp")),
    "kafka.token_id": ("", ("*.token_id",)),
    "kafka.token_hmac": ("", ("*.hmac",)),
    "kafka.include_cluster_authorized_ops": ("", ("include_cluster_authorized_operations",)),
    "kafka.include_topic_authorized_ops": ("", ("include_topic_authorized_operations",)),
    "kafka.cluster_authorized_ops": ("", ("cluster_authorized_operations",)),
    "kafka.topic_authorized_ops": ("", ("*.topic_authorized_operations",)),
    "kafka.include_group_authorized_ops": ("", ("include_authorized_operations",)),
    "kafka.group_authorized_ops": ("", ("*.groups.authorized_operations",)),
    "kafka.election_type": ("", ("election_type",)),
    "kafka.tagged_field_data": ("", ("*.unknown_fields",)),
    "kafka.client_software_name": ("", ("client_software_name",)),
    "kafka.client_software_version": ("", ("client_software_version",)),
}


def wireshark_rows(text: str) -> list[tuple[str, str, str]]:
    """(abbrev, type, description) of every field of the kafka protocol in `tshark -G fields`."""
    rows = []
    for line in text.splitlines():
        cols = line.split("\t")
        if len(cols) >= 5 and cols[0] == "F" and cols[4] == "kafka":
            rows.append((cols[2], cols[3], cols[1]))
    return rows


def render(rows: list[tuple[str, str, str]]) -> str:
    fields = [r for r in rows if r[1] != "FT_NONE"]
    expert = len(rows) - len(fields)
    known = {r[0] for r in fields}
    stale = sorted(set(MAPPING) - known)
    if stale:
        raise SystemExit(f"MAPPING names fields Wireshark does not register: {', '.join(stale)}")
    out = [
        '"""Wireshark\'s Kafka field names (its field registrations, as `tshark -G fields` lists them)',
        "as aliases of kdissect's keys. Generated by tools/gen_kafka_wireshark_names.py: do not edit.",
        "",
        "WIRESHARK_NAMES: name -> (description, kind, targets); a target is a key path below `kafka.`,",
        "`*.suffix` (every key whose path ends so), `info:key` (an info fact) or a `kdissect.` key; kind",
        '"request" or "response" restricts the alias to those messages. UNMAPPED: Wireshark\'s fields',
        f'with no kdissect counterpart. {expert} expert items (FT_NONE) are diagnostics and left out.',
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "WIRESHARK_NAMES: dict[str, tuple[str, str, tuple[str, ...]]] = {",
    ]
    for abbrev, ftype, desc in fields:
        if abbrev in MAPPING:
            kind, targets = MAPPING[abbrev]
            out.append(f"    {abbrev!r}: ({f'{desc} ({ftype})'!r}, {kind!r}, {targets!r}),")
    out.append("}")
    out.append("")
    out.append("UNMAPPED: tuple[str, ...] = (")
    for abbrev, _ftype, _desc in fields:
        if abbrev not in MAPPING:
            out.append(f"    {abbrev!r},")
    out.append(")")
    return "\n".join(out) + "\n"


def main() -> None:
    if len(sys.argv) > 1:
        text = Path(sys.argv[1]).read_text()
    else:
        text = subprocess.run(["tshark", "-G", "fields"], capture_output=True, text=True, check=True).stdout
    OUT.write_text(render(wireshark_rows(text)))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
