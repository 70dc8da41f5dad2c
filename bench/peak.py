"""Peak resident memory of this process, such that a child process reports its own.

``getrusage(RUSAGE_SELF).ru_maxrss`` is inherited across ``fork`` and kept across
``execve`` on Linux: a benchmark's child process started after the parent grew reports
the parent's peak when its own is lower (``bench/analysis_memory.py`` reported 744 MB
for both of its studies this way, the parent's size after extracting them). The kernel's
``VmHWM`` belongs to the address space, which ``execve`` replaces, so it is the child's
own; ``ru_maxrss`` is the fallback where ``/proc`` is missing.
"""

from __future__ import annotations

import resource


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (``VmHWM``; else ``ru_maxrss``)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
