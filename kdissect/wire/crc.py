"""CRC-32C (Castagnoli), the checksum of Kafka record batches and Pulsar payloads.

It is the `crc32c` package's C function, loaded from the package's extension on its own: the
package's `__init__` also reads its own version through `importlib.metadata`, whose imports
(email, zipfile, tempfile, ...) cost about 18 ms of CPU, a fifth of kdissect's start-up. Where
the extension cannot be found that way, the package is imported as usual.
"""

from collections.abc import Callable
from importlib.machinery import PathFinder
from importlib.util import find_spec, module_from_spec


def _load() -> Callable[[bytes | bytearray | memoryview], int]:
    """The package's `crc32c` function, from its extension module alone when possible."""
    package = find_spec("crc32c")
    if package is not None and package.submodule_search_locations is not None:
        spec = PathFinder.find_spec("crc32c._crc32c", list(package.submodule_search_locations))
        if spec is not None and spec.loader is not None:
            module = module_from_spec(spec)
            spec.loader.exec_module(module)
            function: Callable[[bytes | bytearray | memoryview], int] = module.crc32c
            return function
    import crc32c  # noqa: PLC0415 - the usual import, only where the extension is not found

    return crc32c.crc32c


crc32c = _load()
