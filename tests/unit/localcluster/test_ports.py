"""free_port chooses below the kernel's ephemeral range, so no outgoing connection takes the port first."""
from __future__ import annotations

from pathlib import Path

from localcluster import ports


def test_the_ephemeral_range_is_read_from_procfs_and_defaults_to_linux_s(tmp_path: Path) -> None:
    written = tmp_path / "ip_local_port_range"
    written.write_text("40000\t50000\n")
    assert ports.ephemeral_range(written) == (40000, 50000)
    assert ports.ephemeral_range(tmp_path / "absent") == (32768, 60999)
    written.write_text("garbage\n")
    assert ports.ephemeral_range(written) == (32768, 60999)
