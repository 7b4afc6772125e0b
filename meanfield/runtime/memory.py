"""How much memory this machine can give a study (`available_memory`), and the limits a
user states in the environment (`MEANFIELD_MEMORY_LIMIT`, `MEANFIELD_WORK_LIMIT`)."""

import math

from .errors import StudyInputError


def parse_number(text: str) -> float:
    """`text` as a float, NaN where it is not a number (a range check then refuses it)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def env_limit(name: str, unit: str) -> float | None:
    """The positive finite number the environment variable `name` states, None where it
    is unset; anything else refused in one line naming it (`unit`: what it counts)."""
    import os

    text = os.environ.get(name)
    if not text:
        return None
    value = parse_number(text)
    if not (math.isfinite(value) and value > 0):
        raise StudyInputError(f"{name}: {text!r} is not a positive number of {unit}")
    return value


def available_memory() -> int:
    """Bytes of memory this machine can give a study: `MEANFIELD_MEMORY_LIMIT` (bytes;
    a stated limit) if set, else the kernel's MemAvailable, else the physical memory; a
    limit that is not a positive finite number is refused in one line."""
    import os

    value = env_limit(
        "MEANFIELD_MEMORY_LIMIT",
        "bytes (e.g. 8e9); unset it to use the machine's available memory",
    )
    if value is not None:
        return int(value)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**34
