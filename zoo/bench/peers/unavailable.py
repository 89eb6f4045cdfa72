"""The one exception peers raise when they cannot take part."""


class PeerUnavailable(Exception):
    """This peer cannot run this workload (not installed, or no equivalent model)."""
