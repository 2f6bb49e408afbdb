"""Type hints of the extension module (src/*.rs); docs/python.md explains the model."""

from types import TracebackType
from typing import Final, Literal, Optional, Tuple, Type, final

from typing_extensions import Buffer, Self

__all__ = [
    "Ring",
    "Producer",
    "Consumer",
    "Register",
    "Writer",
    "Reader",
    "Sample",
    "Event",
    "Signaller",
    "Listener",
    "PeerState",
    "SlotView",
    "unlink",
    "LAYOUT_MAJOR",
    "LAYOUT_MINOR",
    "DEFAULT_MODE",
    "TameIpcError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "LayoutMismatchError",
    "IncompatibleVersionError",
    "NotASegmentError",
    "NotReadyError",
    "RoleTakenError",
    "CorruptedError",
    "UntrustedError",
    "ContendedError",
    "OsError",
    "InheritedError",
]

LAYOUT_MAJOR: Final[int]
LAYOUT_MINOR: Final[int]
DEFAULT_MODE: Final[int]

class TameIpcError(Exception): ...
class NotFoundError(TameIpcError): ...
class AlreadyExistsError(TameIpcError): ...
class PermissionDeniedError(TameIpcError): ...
class LayoutMismatchError(TameIpcError): ...
class IncompatibleVersionError(TameIpcError): ...
class NotASegmentError(TameIpcError): ...
class NotReadyError(TameIpcError): ...
class RoleTakenError(TameIpcError): ...
class CorruptedError(TameIpcError): ...
class UntrustedError(TameIpcError): ...
class ContendedError(TameIpcError): ...
class OsError(TameIpcError): ...
class InheritedError(TameIpcError): ...

def unlink(name: str) -> None:
    """Removes /dev/shm/tame.NAME (existing mappings stay valid); NotFoundError if absent."""

@final
class PeerState:
    """Who holds a role, as seen now (checked against /proc on demand)."""

    @property
    def state(self) -> Literal["absent", "alive", "dead", "unknown"]: ...
    @property
    def pid(self) -> Optional[int]: ...
    def __eq__(self, other: object, /) -> bool:
        """Equal to another PeerState with the same state and pid, or to the state's name."""

@final
class SlotView:
    """A ring slot exported through the buffer protocol (what peek()/reserve() views)."""

@final
class Ring:
    """A ring segment: one producer, one consumer, fixed-size elements."""

    @staticmethod
    def create(
        name: str,
        elem_size: int,
        capacity: int,
        *,
        elem_align: int = 8,
        type_tag: int = 0,
        mode: int = 0o600,
    ) -> Ring:
        """Creates /dev/shm/tame.NAME (refused if it exists). capacity: a power of two."""
    @staticmethod
    def open(
        name: str, elem_size: int, capacity: int, *, elem_align: int = 8, type_tag: int = 0
    ) -> Ring:
        """Opens an existing named ring that must have exactly this shape."""
    @staticmethod
    def open_any(name: str) -> Ring:
        """Opens a named ring of any shape (with an untrusted creator, open the exact shape)."""
    @staticmethod
    def create_anonymous(
        elem_size: int, capacity: int, *, elem_align: int = 8, type_tag: int = 0
    ) -> Ring:
        """An anonymous ring (sealed memfd); share it by passing fileno()."""
    @staticmethod
    def from_fd(
        fd: int, elem_size: int, capacity: int, *, elem_align: int = 8, type_tag: int = 0
    ) -> Ring:
        """Maps a ring from a descriptor (duplicated); sealed against shrinking, else UntrustedError."""
    def producer(self) -> Producer:
        """Attaches the producer role (RoleTakenError unless absent or certainly dead)."""
    def consumer(self) -> Consumer:
        """Attaches the consumer role (RoleTakenError unless absent or certainly dead)."""
    def fileno(self) -> int:
        """The descriptor to pass to another process (valid while this ring lives)."""
    @property
    def name(self) -> Optional[str]: ...
    @property
    def elem_size(self) -> int: ...
    @property
    def elem_align(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def type_tag(self) -> int: ...
    @property
    def lost(self) -> bool:
        """True once someone shrank this named segment and this side was cut off."""
    def unlink(self) -> None: ...

@final
class Producer:
    """The producer end. Never waits: a full ring is reported."""

    def push(self, data: Buffer) -> bool:
        """Copies one element (exactly elem_size bytes); False when the ring is full."""
    def push_many(self, data: Buffer) -> int:
        """Pushes as many whole elements of data as fit; returns how many."""
    def reserve(self) -> Optional[memoryview]:
        """The next free slot as a writable memoryview (None when full); then commit()."""
    def commit(self) -> None:
        """Publishes the reserved slot; BufferError while its view is held."""
    def free_slots(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def elem_size(self) -> int: ...
    def consumer_state(self) -> PeerState: ...
    def close(self) -> None:
        """Gives the role up; BufferError while a reserved slot's view is held."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

@final
class Consumer:
    """The consumer end. Never waits: an empty ring is reported."""

    def pop(self) -> Optional[bytes]:
        """The oldest element, or None when empty."""
    def pop_into(self, out: Buffer) -> int:
        """Pops up to len(out) // elem_size waiting elements into out; returns how many."""
    def peek(self) -> Optional[memoryview]:
        """The oldest element in place (read-only; None when empty), valid until release()."""
    def release(self) -> None:
        """Frees the peeked slot; BufferError while its view is held."""
    def __len__(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def elem_size(self) -> int: ...
    def producer_state(self) -> PeerState: ...
    def close(self) -> None:
        """Gives the role up; BufferError while a peeked slot's view is held."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

@final
class Register:
    """A latest-value register: one writer, any number of readers."""

    @staticmethod
    def create(
        name: str, elem_size: int, *, elem_align: int = 8, type_tag: int = 0, mode: int = 0o600
    ) -> Register: ...
    @staticmethod
    def open(
        name: str,
        elem_size: int,
        *,
        elem_align: int = 8,
        type_tag: int = 0,
        read_only: bool = False,
    ) -> Register: ...
    @staticmethod
    def create_anonymous(elem_size: int, *, elem_align: int = 8, type_tag: int = 0) -> Register: ...
    @staticmethod
    def from_fd(
        fd: int,
        elem_size: int,
        *,
        elem_align: int = 8,
        type_tag: int = 0,
        read_only: bool = False,
    ) -> Register: ...
    def writer(self) -> Writer: ...
    def reader(self, max_attempts: int = 256) -> Reader: ...
    def fileno(self) -> int: ...
    @property
    def name(self) -> Optional[str]: ...
    @property
    def elem_size(self) -> int: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def lost(self) -> bool: ...
    def unlink(self) -> None: ...

@final
class Writer:
    def write(self, data: Buffer) -> None:
        """Publishes exactly elem_size bytes. Never waits."""
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

@final
class Sample:
    @property
    def value(self) -> bytes: ...
    @property
    def fresh(self) -> bool: ...
    @property
    def version(self) -> int: ...

@final
class Reader:
    def read(self) -> Optional[Sample]:
        """The latest value (None if never written); ContendedError after max_attempts."""
    def read_into(self, out: Buffer) -> Optional[Tuple[bool, int]]:
        """Reads into out (exactly elem_size bytes); (fresh, version), None if never written."""
    def writer_state(self) -> PeerState: ...

@final
class Event:
    """An event counter: any number of signallers and listeners."""

    @staticmethod
    def create(name: str, *, mode: int = 0o600) -> Event: ...
    @staticmethod
    def open(name: str, *, read_only: bool = False) -> Event: ...
    @staticmethod
    def create_anonymous() -> Event: ...
    @staticmethod
    def from_fd(fd: int, *, read_only: bool = False) -> Event: ...
    def signaller(self) -> Signaller: ...
    def listener(self) -> Listener: ...
    def fileno(self) -> int: ...
    @property
    def name(self) -> Optional[str]: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def lost(self) -> bool: ...
    def unlink(self) -> None: ...

@final
class Signaller:
    def signal(self) -> None: ...
    def signal_and_wake(self) -> None: ...

@final
class Listener:
    def poll(self) -> int: ...
    def wait(self, timeout: float) -> int:
        """Sleeps (without the GIL) up to timeout seconds (any non-negative number, math.inf
        included); the number of new events, 0 on timeout. Ctrl-C interrupts it."""
