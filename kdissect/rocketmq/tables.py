"""Hand-written RocketMQ remoting tables: header flags, system flags, magic codes, which codes
carry which bodies, and how ext-field values are typed."""

# Facts (numbers and names) from Apache RocketMQ, Apache-2.0.

from __future__ import annotations

from kdissect.rocketmq.codes import LANGUAGES, REQUEST_CODES, RESPONSE_CODES

MAX_FRAME = 16 * 1024 * 1024

SERIALIZE_TYPES = {0: "JSON", 1: "ROCKETMQ"}
SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

LANGUAGE_CODES = {name: code for code, name in LANGUAGES.items()}

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2
HEADER_FLAGS = ((FLAG_RESPONSE, "RESPONSE"), (FLAG_ONEWAY, "ONEWAY"))

# MessageSysFlag: single bits, then the two-bit transaction type and the compression type.
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
SYSFLAG_NEED_UNWRAP = 0x40
SYSFLAG_INNER_BATCH = 0x80
MESSAGE_SYSFLAG_BITS = (
    (0x1, "COMPRESSED"),
    (0x2, "MULTI_TAGS"),
    (0x10, "BORNHOST_V6"),
    (0x20, "STOREHOSTADDRESS_V6"),
    (0x40, "NEED_UNWRAP"),
    (0x80, "INNER_BATCH"),
)
TRANSACTION_TYPES = {0x4: "TRANSACTION_PREPARED", 0x8: "TRANSACTION_COMMIT", 0xC: "TRANSACTION_ROLLBACK"}
COMPRESSION_MASK = 0x700
COMPRESSION_TYPES = {0: "ZLIB", 1: "LZ4", 2: "ZSTD", 3: "ZLIB"}

PULL_SYSFLAG_BITS = (
    (0x1, "COMMIT_OFFSET"),
    (0x2, "SUSPEND"),
    (0x4, "SUBSCRIPTION"),
    (0x8, "CLASS_FILTER"),
    (0x10, "LITE_PULL"),
)

MAGIC_V1 = 0xDAA320A7  # one-byte topic length
MAGIC_V2 = 0xDAA320AB  # two-byte topic length
MAGIC_BLANK = 0xCBD43194  # end-of-file filler in commit-log files
MAGIC_NAMES = {MAGIC_V1: "MESSAGE_V1", MAGIC_V2: "MESSAGE_V2", MAGIC_BLANK: "BLANK"}

PROPERTY_NAME_SEP = "\x01"
PROPERTY_SEP = "\x02"

# Request codes whose header is SendMessageRequestHeaderV2 (one-letter ext-field keys).
SEND_V2_CODES = frozenset({310, 320, 325})
# Request codes whose body is one message body (compressed per sysFlag) or a batch.
SEND_CODES = frozenset({10, 310, 324, 325})
BATCH_SEND_CODES = frozenset({320})
ALL_SEND_CODES = SEND_CODES | BATCH_SEND_CODES
PULL_CODES = frozenset({11, 361})
# Responses to these requests carry stored messages back to back.
MESSAGE_RESPONSE_CODES = frozenset({11, 12, 33, 361, 200050, 200052})
# Requests (broker to client) whose body is one stored message.
MESSAGE_REQUEST_CODES = frozenset({39, 309})

# Response codes that are not failures.
SUCCESS = 0
PULL_STATUS_CODES = frozenset({19, 20, 21})
PARTIAL_SUCCESS_CODES = frozenset({10, 11, 12})

# Ext-field keys (after V2 letters are replaced by full names) whose values are integers.
INT_EXT_KEYS = frozenset({
    "queueId", "queueOffset", "maxMsgNums", "commitOffset", "suspendTimeoutMillis", "subVersion",
    "defaultTopicQueueNums", "flag", "reconsumeTimes", "maxReconsumeTimes", "nextBeginOffset",
    "minOffset", "maxOffset", "suggestWhichBrokerId", "offset", "timestamp", "maxMsgBytes",
    "offsetDelta", "topicSysFlag", "groupSysFlag", "forbiddenType", "delayLevel", "originQueueId",
    "tranStateTableOffset", "commitLogOffset", "commitOrRollback", "brokerId", "maxNum",
    "beginTimestamp", "endTimestamp", "invisibleTime", "pollTime", "bornTime", "initMode",
})
TIME_EXT_KEYS = frozenset({"bornTimestamp", "timestamp", "beginTimestamp", "endTimestamp", "bornTime"})
# Integer ext-fields shown in hex (message and subscription flag words), and durations in ms whose
# names carry no unit (those ending in Millis are known by their name: model.duration_hint).
HEX_EXT_KEYS = frozenset({"flag", "topicSysFlag", "groupSysFlag"})
DURATION_MS_EXT_KEYS = frozenset({"invisibleTime", "pollTime"})
PROPERTIES_EXT_KEYS = frozenset({"properties"})


def request_name(code: int) -> str:
    return REQUEST_CODES.get(code, f"UNKNOWN_{code}")


def response_name(code: int) -> str:
    return RESPONSE_CODES.get(code, f"UNKNOWN_{code}")


def flag_names(value: int, bits: tuple[tuple[int, str], ...]) -> str:
    names = [name for mask, name in bits if value & mask]
    return "|".join(names) if names else "0"


def message_sysflag_names(value: int) -> str:
    names = [name for mask, name in MESSAGE_SYSFLAG_BITS if value & mask]
    tran = TRANSACTION_TYPES.get(value & 0xC)
    if tran:
        names.append(tran)
    if value & SYSFLAG_COMPRESSED:
        names.append(COMPRESSION_TYPES.get((value & COMPRESSION_MASK) >> 8, "UNKNOWN_COMPRESSION"))
    return "|".join(names) if names else "0"
