"""kdissect.wire.crc: the crc32c package's function, loaded without the package's __init__."""

import subprocess
import sys

import crc32c

from kdissect.wire import crc


def test_same_checksums_as_the_package() -> None:
    for data in (b"", b"a", b"123456789", bytes(range(256)) * 17):
        assert crc.crc32c(data) == crc32c.crc32c(data)
        assert crc.crc32c(memoryview(data)[1:]) == crc32c.crc32c(data[1:])
    assert crc.crc32c(b"123456789") == 0xE3069283


def test_loading_it_does_not_import_the_package_metadata() -> None:
    code = "import sys, kdissect.wire.crc; print('importlib.metadata' in sys.modules, 'crc32c' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
