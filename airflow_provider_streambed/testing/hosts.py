"""Test hosts in network namespaces: a Linux bridge in the root namespace and veth-connected namespaces.

Each :class:`NetworkHosts` claims one private subnet ``10.231.<n>.0/24``: the bridge ``sbr<n>`` holds
``10.231.<n>.1`` (how processes on the hosts reach the root namespace's listeners: a Spark driver, an
object store) and host ``i`` is the namespace ``sbn<n>h<i>`` with the address ``10.231.<n>.<i + 2>``,
its own ``lo`` and no route beyond the subnet. A process on a host reaches the subnet's addresses and
its own loopback, never the root namespace's 127.0.0.1 nor the outside world. Needs root and
iproute2; :class:`HostsUnavailableError` says what is missing.

The bridge's alias names the owning process, so the subnets a killed run left behind (its bridge,
veths, namespaces and their processes) are removed by the next :class:`NetworkHosts` to start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from airflow_provider_streambed.testing.throwaway import Throwaway

logger = logging.getLogger(__name__)

SUBNET = "10.231"
#: The bridge's alias: which process owns the subnet.
OWNER = "streambed-hosts pid="
#: Mounts a fresh tmpfs over /tmp, then runs the command (``unshare`` gives the private mount namespace).
PRIVATE_TMP = 'mount -t tmpfs -o "size=$0,mode=1777" streambed-tmp /tmp && exec "$@"'


class HostsUnavailableError(RuntimeError):
    """Network namespaces cannot be made here (not root, or no usable ``ip netns``)."""


@dataclass(frozen=True, slots=True)
class Host:
    """One test host: a network namespace, its address and its end of the veth pair."""

    index: int
    namespace: str
    address: str
    interface: str


def run_ip(*arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip <arguments>``; raises ``CalledProcessError`` (with ip's message) if ``check`` and it fails."""
    result = subprocess.run(["ip", *arguments], capture_output=True, text=True, check=False)
    if check and result.returncode:
        raise subprocess.CalledProcessError(result.returncode, result.args, result.stdout, result.stderr)
    return result


def check_namespaces_usable() -> None:
    """Fail loudly unless this process may make network namespaces.

    Raises:
        HostsUnavailableError: not root, no ``ip``/``unshare`` binary, or ``ip netns`` refused.
    """
    if os.geteuid() != 0:
        raise HostsUnavailableError("network-namespace test hosts need root (ip netns add, veth, bridge)")
    missing = [tool for tool in ("ip", "unshare") if shutil.which(tool) is None]
    if missing:
        raise HostsUnavailableError(f"network-namespace test hosts need {', '.join(missing)} (iproute2, util-linux)")
    listing = run_ip("netns", "list", check=False)
    if listing.returncode:
        raise HostsUnavailableError(f"'ip netns list' failed: {listing.stderr.strip()}")


class NetworkHosts(Throwaway):
    """A bridge and ``count`` namespaced hosts on a private /24; a context manager that removes them all.

    Args:
        count: how many hosts (network namespaces).
    """

    def __init__(self, count: int) -> None:
        if not 1 <= count <= 250:
            raise ValueError(f"NetworkHosts.count must be between 1 and 250, not {count}")
        self.count = count
        self.subnet = -1
        self.hosts: tuple[Host, ...] = ()

    @property
    def bridge(self) -> str:
        """The bridge's interface name in the root namespace."""
        return f"sbr{self.subnet}"

    @property
    def address(self) -> str:
        """The bridge's address: the root namespace as the hosts see it."""
        return f"{SUBNET}.{self.subnet}.1"

    def prefix(self, index: int) -> list[str]:
        """The argv prefix that runs a command on host ``index`` (``ip netns exec <namespace>``)."""
        return ["ip", "netns", "exec", self.hosts[index].namespace]

    def spawn(
        self,
        index: int,
        command: Sequence[str],
        environment: Mapping[str, str],
        log: IO[bytes],
        private_tmp: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` on host ``index`` as the leader of a new session (and process group).

        Args:
            index: the host.
            command: the program and its arguments.
            environment: its whole environment (nothing is inherited); its ``PATH`` must find ``ip``,
                ``unshare`` and ``sh``.
            log: where its stdout and stderr go (opened in the root namespace).
            private_tmp: a tmpfs size (``"512m"``): run in a private mount namespace with a fresh tmpfs
                over ``/tmp``, gone when its last process ends; ``None`` shares the root's ``/tmp``.
        """
        argv = list(command)
        if private_tmp is not None:
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", PRIVATE_TMP, private_tmp, *argv]
        return subprocess.Popen([*self.prefix(index), *argv], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=dict(environment), start_new_session=True)

    def pids(self, index: int) -> list[int]:
        """The processes running on host ``index`` (in its network namespace)."""
        return namespace_pids(self.hosts[index].namespace)

    def kill_processes(self, index: int) -> None:
        """SIGKILL every process on host ``index`` (whatever its process group), as a host crash would."""
        kill_namespace_processes(self.hosts[index].namespace)

    def start(self) -> NetworkHosts:
        """Claim a subnet and make the bridge and the hosts; returns self.

        Raises:
            HostsUnavailableError: not root, no ``ip``, or network namespaces refused.
        """
        check_namespaces_usable()
        self.subnet = claim_subnet(random.randrange(256))
        self.hosts = tuple(self._add_host(index) for index in range(self.count))
        logger.info("test hosts: bridge %s %s/24, %d namespaces", self.bridge, self.address, self.count)
        return self

    def stop(self) -> None:
        """Kill the hosts' processes, remove the namespaces, veths and the bridge (safe to call twice)."""
        if self.subnet >= 0:
            remove_subnet(self.subnet)
        self.subnet = -1  # the number is free for others now: a second stop must not touch theirs
        self.hosts = ()

    def _add_host(self, index: int) -> Host:
        host = Host(index, f"sbn{self.subnet}h{index}", f"{SUBNET}.{self.subnet}.{index + 2}",
                    f"sbp{self.subnet}h{index}")
        veth = f"sbv{self.subnet}h{index}"
        run_ip("netns", "add", host.namespace)
        run_ip("link", "add", veth, "type", "veth", "peer", "name", host.interface, "netns", host.namespace)
        run_ip("link", "set", veth, "master", self.bridge, "up")
        run_ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
        run_ip("-n", host.namespace, "link", "set", host.interface, "up")
        run_ip("-n", host.namespace, "link", "set", "lo", "up")
        return host


def claim_subnet(start: int) -> int:
    """Create the bridge of the first free subnet number from ``start`` on; returns the number.

    Creating the bridge is the claim (it fails if the name exists); a subnet already addressed on
    another interface is skipped. Subnets whose owner died are removed first.

    Raises:
        HostsUnavailableError: all 256 numbers are taken, or the bridge cannot be made.
    """
    remove_stale_subnets()
    for offset in range(256):
        subnet = (start + offset) % 256
        bridge = f"sbr{subnet}"
        if run_ip("-o", "-4", "addr", "show", "to", f"{SUBNET}.{subnet}.0/24").stdout.strip():
            continue
        created = run_ip("link", "add", "name", bridge, "type", "bridge", check=False)
        if created.returncode:
            if "File exists" in created.stderr:
                continue
            raise HostsUnavailableError(f"cannot create bridge {bridge}: {created.stderr.strip()}")
        run_ip("link", "set", "dev", bridge, "alias", f"{OWNER}{os.getpid()}")
        run_ip("addr", "add", f"{SUBNET}.{subnet}.1/24", "dev", bridge)
        run_ip("link", "set", bridge, "up")
        return subnet
    raise HostsUnavailableError(f"all subnets {SUBNET}.0-255.0/24 are taken")


def owner_is_dead(bridge: str) -> bool:
    """Whether ``bridge`` is ours (its alias names an owner) and its owning process has ended."""
    with contextlib.suppress(OSError):
        match = re.fullmatch(re.escape(OWNER) + r"(\d+)", Path(f"/sys/class/net/{bridge}/ifalias").read_text().strip())
        if match:
            return not Path(f"/proc/{match[1]}").exists()
    return False


def remove_stale_subnets() -> None:
    """Remove the subnets whose owning process has ended (a run killed before its cleanup)."""
    for line in run_ip("-o", "link", "show", "type", "bridge").stdout.splitlines():
        name = line.split(":")[1].strip()
        if re.fullmatch(r"sbr\d+", name) and owner_is_dead(name):
            logger.info("test hosts: removing subnet %s.%s.0/24 left by a dead process", SUBNET, name[3:])
            remove_subnet(int(name[3:]))


def remove_subnet(subnet: int) -> None:
    """Remove everything of subnet ``subnet``: its namespaces' processes, the namespaces, veths, bridge."""
    left = subnet_leftovers(subnet)
    for namespace in [name for name in left if name.startswith(f"sbn{subnet}h")]:
        kill_namespace_processes(namespace)
        run_ip("netns", "delete", namespace, check=False)
    for veth in [name for name in left if name.startswith(f"sbv{subnet}h")]:  # deleting one end deletes its peer
        run_ip("link", "delete", veth, check=False)
    run_ip("link", "delete", f"sbr{subnet}", check=False)


def namespace_pids(namespace: str) -> list[int]:
    """The processes whose network namespace is ``namespace``."""
    return [int(pid) for pid in run_ip("netns", "pids", namespace, check=False).stdout.split()]


def kill_namespace_processes(namespace: str, timeout: float = 10.0) -> None:
    """SIGKILL the processes of ``namespace`` until none is left (children forked meanwhile included).

    Raises:
        TimeoutError: processes are still there after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while pids := namespace_pids(namespace):
        if time.monotonic() > deadline:
            raise TimeoutError(f"processes {pids} of namespace {namespace} survive SIGKILL")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def subnet_leftovers(subnet: int) -> list[str]:
    """What is left of subnet ``subnet``: its bridge, veths and namespaces by name (empty once removed)."""
    namespaces = [line.split()[0] for line in run_ip("netns", "list").stdout.splitlines() if line.strip()]
    links = [line.split(":")[1].strip().split("@")[0] for line in run_ip("-o", "link", "show").stdout.splitlines()]
    return [name for name in [*links, *namespaces]
            if name == f"sbr{subnet}" or name.startswith((f"sbv{subnet}h", f"sbn{subnet}h"))]
