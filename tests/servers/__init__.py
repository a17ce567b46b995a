"""Loopback servers the tests talk to: real SDK servers and byte-faithful fixtures."""
