"""User files (hardware, model presets, plans) are read only when they are regular, bounded, UTF-8 files: a FIFO or a
device would block or never end, so they are refused by name before any read."""

from __future__ import annotations

import os

import pytest

from planner.errors import InvalidInput, read_text_file


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match=r"hardware file '.*pipe' is not a regular file"):
        read_text_file(fifo, "hardware file")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_device_is_refused():
    with pytest.raises(InvalidInput, match="model preset file '/dev/zero' is not a regular file"):
        read_text_file("/dev/zero", "model preset file")


def test_directory_is_refused(tmp_path):
    with pytest.raises(InvalidInput, match="cannot read plan file '.*': Is a directory"):
        read_text_file(tmp_path, "plan file")


def test_size_cap_and_encoding(tmp_path):
    big = tmp_path / "big.toml"
    big.write_bytes(b"a" * 101)
    with pytest.raises(InvalidInput, match=r"is 101 bytes; at most 100 are read"):
        read_text_file(big, "hardware file", max_bytes=100)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InvalidInput, match="is not UTF-8 text"):
        read_text_file(binary, "hardware file")
    ok = tmp_path / "ok.toml"
    ok.write_text("name = 'x'\n", encoding="utf-8")
    assert read_text_file(ok, "hardware file", max_bytes=100) == "name = 'x'\n"


def test_missing_file_names_the_reason(tmp_path):
    with pytest.raises(InvalidInput, match=r"cannot read plan file '.*nope.json': No such file"):
        read_text_file(tmp_path / "nope.json", "plan file")
