"""Secret-holding files of the local run are private to this user from their creation."""

from __future__ import annotations

from pathlib import Path

from local.files import write_private


def test_written_files_are_private_and_hold_exactly_the_data(tmp_path: Path):
    text_file, bytes_file = tmp_path / "run" / "plan.json", tmp_path / "run" / "key.pem"
    write_private(text_file, "{\"secret\": \"é\"}")
    write_private(bytes_file, b"\x00key")
    assert text_file.read_text("utf-8") == "{\"secret\": \"é\"}" and bytes_file.read_bytes() == b"\x00key"
    assert {f.stat().st_mode & 0o777 for f in (text_file, bytes_file)} == {0o600}
    write_private(text_file, "short")  # rewriting truncates
    assert text_file.read_text() == "short"
