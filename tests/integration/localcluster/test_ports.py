"""free_port on real sockets: below the kernel's ephemeral range, skipping ports in use."""
from __future__ import annotations

import random
import socket

import pytest

from localcluster import ports


def test_ports_are_below_the_ephemeral_range_bindable_and_never_handed_out_twice() -> None:
    low, _high = ports.ephemeral_range()
    chosen = [ports.free_port(rng=random.Random(seed)) for seed in range(40)]
    if low - ports.LOWEST_PORT >= 1000:
        assert all(ports.LOWEST_PORT <= port < low for port in chosen), chosen
    assert len(set(chosen)) == len(chosen)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", chosen[-1]))  # nothing holds it


def test_a_port_something_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (32768, 60999))
    listener = socket.socket()
    try:
        taken = ports.free_port(rng=random.Random(7))
        ports._handed_out.discard(taken)
        listener.bind(("127.0.0.1", taken))
        listener.listen()
        again = ports.free_port(rng=random.Random(7))  # the same first draw: now in use
        assert again != taken
        assert ports.LOWEST_PORT <= again < 32768
    finally:
        listener.close()


def test_a_narrow_band_falls_back_to_the_kernel_s_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (ports.LOWEST_PORT + 10, 60999))
    port = ports.free_port()
    assert not ports.LOWEST_PORT <= port < ports.LOWEST_PORT + 10
