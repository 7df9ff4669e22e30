"""kiln's errors as Python exceptions: one class per kiln_status, each
carrying kiln's message (which names the file, field or argument at fault)."""


class KilnError(Exception):
    """An error reported by kiln. `status` is the kiln_status code and
    `message` kiln's text, which names what was wrong and where."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.message = message
        self.status = status


class InvalidArgumentError(KilnError, ValueError):
    """A malformed argument or option."""


class NotFoundError(KilnError, LookupError):
    """A file, tensor or request id that does not exist."""


class CorruptError(KilnError):
    """A model file that contradicts its own format."""


class UnsupportedError(KilnError):
    """Valid but not implemented (an architecture, a dtype)."""


class OutOfRangeError(KilnError, ValueError):
    """A value beyond a limit: the context length, a buffer's size."""


class ResourceExhaustedError(KilnError):
    """Out of KV cache blocks or sequences."""


class KilnIOError(KilnError, OSError):
    """The operating system refused (open, mmap, read)."""

    def __init__(self, message: str, status: int):
        KilnError.__init__(self, message, status)

    def __str__(self) -> str:
        return self.message


class CancelledError(KilnError):
    """Stopped on request."""


class InternalError(KilnError):
    """A broken invariant: a bug in kiln."""


class KilnMemoryError(KilnError, MemoryError):
    """An allocation failed."""


# By kiln_status value (see include/kiln/kiln.h).
ERROR_CLASSES = {
    1: InvalidArgumentError,
    2: NotFoundError,
    3: CorruptError,
    4: UnsupportedError,
    5: OutOfRangeError,
    6: ResourceExhaustedError,
    7: KilnIOError,
    8: CancelledError,
    9: InternalError,
    10: KilnMemoryError,
}


def error_for(status: int, message: str) -> KilnError:
    """The exception for a kiln_status and its message."""
    return ERROR_CLASSES.get(status, KilnError)(message, status)
