"""The bus tests' real nats-server fixtures (one server per test), and no process left behind."""

from tests.bus.conftest import bus, bus_config, nats_server, no_process_left_behind

__all__ = ["bus", "bus_config", "nats_server", "no_process_left_behind"]
