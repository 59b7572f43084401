"""Which API a response answers when its request was not captured, from its bytes alone.

Every (api key, version) response plan is tried on the body; the API is inferred only when the
body decodes completely and cleanly under exactly one API key (several versions of that key
may fit: the newest is used). Short bodies fit too many APIs and are never inferred. The plans
share one message's allowance of array elements: a body whose arrays many plans read far is not
inferred, so that an inference costs about one decoding of the body, not one for each plan.
"""

from __future__ import annotations

from kdissect.dissect.base import Budget, Options
from kdissect.errors import DecodeError
from kdissect.kafka.apis import APIS
from kdissect.kafka.headers import read_response_header, response_header_version
from kdissect.kafka.ops import Ctx
from kdissect.kafka.plan import plan_for
from kdissect.wire.reader import WireReader

MIN_BODY = 12  # bytes; below this almost every error-code-only response fits


def _fits(data: bytes, api_key: int, version: int, opts: Options, budget: Budget) -> bool:
    r = WireReader(data, 4)
    try:
        read_response_header(r, response_header_version(api_key, version))
        plan_for(api_key, version, False)(r, Ctx(opts, budget=budget))
    except DecodeError:
        return False
    return r.remaining == 0


def infer_response(data: bytes, opts: Options) -> tuple[int, list[int]] | None:
    """(api key, fitting versions newest first) when exactly one API key fits, else None."""
    if len(data) - 8 < MIN_BODY:
        return None
    found: tuple[int, list[int]] | None = None
    quiet = Options(decode_records=False, max_decompressed=opts.max_decompressed)
    budget = Budget(quiet)  # every plan's arrays together
    for api_key, api in APIS.items():
        versions = [v for v in range(api.newest, -1, -1) if _fits(data, api_key, v, quiet, budget)]
        if budget.elements_left <= 0:
            return None  # spent: the plans after this one could not be told apart
        if not versions:
            continue
        if found is not None:
            return None
        found = (api_key, versions)
    return found
