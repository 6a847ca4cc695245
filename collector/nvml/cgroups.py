"""PID -> container -> pod, from /proc/<pid>/cgroup, the way a node agent can without asking the kubelet.

Kubelet puts each pod's containers under a cgroup named after the pod UID, in one of two spellings:
cgroupfs  `.../kubepods/burstable/pod<uid>/<container id>`            (cgroup v1, and v2 with the cgroupfs driver)
systemd   `.../kubepods-burstable-pod<uid with _>.slice/cri-containerd-<container id>.scope` (and docker-, crio-)
The container runtime prefix and `.scope` suffix vary; the 64-hex container id does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_CONTAINER = re.compile(r"(?:^|[/-])([0-9a-f]{64})(?:\.scope)?$")


@dataclass(frozen=True)
class PodRef:
    pod_uid: str | None
    container_id: str | None


def parse_cgroup(text: str) -> PodRef:
    """The pod UID and container id named in a /proc/<pid>/cgroup file, if any."""
    pod = container = None
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        m = _POD.search(path)
        if m:
            pod = m.group(1).replace("_", "-")
            c = _CONTAINER.search(path)
            if c:
                container = c.group(1)
            break
    return PodRef(pod, container)


def pod_of_pid(pid: int, proc_root: Path = Path("/proc")) -> PodRef:
    try:
        return parse_cgroup((Path(proc_root) / str(pid) / "cgroup").read_text())
    except OSError:  # the process ended, or runs in another PID namespace: not attributable, not an error
        return PodRef(None, None)
