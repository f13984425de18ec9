"""Kiln's exceptions: every failed library call raises KilnError with the library's message."""
from ._kiln import KilnError


class BlobNotFound(KilnError, KeyError):
    """A blob or layer name the net does not have (also a KeyError, as a dict lookup)."""

    def __init__(self, message):
        KilnError.__init__(self, message, "NOT_FOUND")

    def __str__(self):  # KeyError would quote the message
        return self.args[0]


def invalid(message):
    """A KilnError for bad input found on the Python side, coded as the library codes it."""
    return KilnError(message, "INVALID_ARGUMENT")
