"""Loopback only (issue 49): the Milvus server the suite starts, in a network namespace whose one interface is
loopback, and the check that reads a server's inet sockets with psutil in the server's own network namespace.

Why a namespace: Milvus 2.3 (PyPI's `milvus` wheel) binds every gRPC server and its metrics server to the wildcard
address (`net.Listen("tcp", ":" + port)` in its code; no setting changes that), and each role registers, and is
dialled, on "the first unicastable address" (the machine's own network address) unless its `ip` is set. Setting
every `ip` to 127.0.0.1 keeps its traffic on loopback; only a namespace with no interface but loopback makes its
wildcard listeners loopback-only. The suite reaches it through a relay listening on 127.0.0.1 in the host's
namespace.

Run by hand (root, or a user allowed user namespaces): `python tests/helpers/loopback.py milvus DIR` starts
Milvus with its data in DIR, writes DIR/ready.json ({"port": the relay's 127.0.0.1 port}) once it answers, and
stops it on SIGTERM or Ctrl+C.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import ipaddress
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
# Every Milvus 2.3 role that registers an address in etcd (indexCoord runs inside dataCoord since 2.3).
MILVUS_ROLES = ("rootCoord", "proxy", "queryCoord", "queryNode", "indexNode", "dataCoord", "dataNode")
MILVUS_PORT = 19530  # inside the namespace every port is free, so the wheel's defaults hold
ETCD_CLIENT_PORT, ETCD_PEER_PORT = 2379, 2380
NAMESPACE_REFUSED = 3  # the exit code when this process may not make a network namespace


def _libc_call(name: str, *args: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{name}: {os.strerror(code)}")


def _loopback_up() -> None:
    """Bring `lo` up (a new network namespace starts with it down), by ioctl: no `ip` binary needed."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    layout = "16sh22x"  # struct ifreq: the name, then ifr_flags in a 24-byte union
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack(layout, fcntl.ioctl(sock, siocgifflags, struct.pack(layout, b"lo", 0)))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack(layout, b"lo", flags | iff_up))


def unshare_loopback_only() -> None:
    """Move this process (single-threaded, before it starts anything) into a new network namespace whose only
    interface is loopback; a non-root user gets a user namespace too (mapped to itself), which that needs."""
    uid, gid = os.geteuid(), os.getegid()
    _libc_call("unshare", CLONE_NEWNET if uid == 0 else CLONE_NEWNET | CLONE_NEWUSER)
    if uid != 0:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _loopback_up()


def enter_network_namespace_of(pid: int) -> None:
    """Join pid's network namespace (and first its user namespace, where it has its own: the non-root case)."""
    for kind, flag in (("user", CLONE_NEWUSER), ("net", CLONE_NEWNET)):
        if os.readlink(f"/proc/{pid}/ns/{kind}") != os.readlink(f"/proc/self/ns/{kind}"):
            fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY)
            try:
                _libc_call("setns", fd, flag)
            finally:
                os.close(fd)


# --- the Milvus server, run as this file's `milvus` command --------------------------------------------------------

def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(1 << 16):
            sink.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)  # the peer's half-close, passed on


def _relay(client: socket.socket) -> None:
    """One connection from the host's loopback to Milvus's proxy on the namespace's loopback, both ways."""
    with client:
        try:
            upstream = socket.create_connection(("127.0.0.1", MILVUS_PORT))
        except OSError:
            return
        with upstream:
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()


def _write_ready(base: Path, outcome: dict[str, Any]) -> None:
    """DIR/ready.json, whole or not at all (the fixture reads it as soon as it appears)."""
    staging = base / "ready.json.tmp"
    staging.write_text(json.dumps(outcome))
    staging.rename(base / "ready.json")


def _etcd_config(base: Path) -> Path:
    """The embedded etcd's own config: client and peer URLs on 127.0.0.1 (its default says `localhost`)."""
    client, peer = f"http://127.0.0.1:{ETCD_CLIENT_PORT}", f"http://127.0.0.1:{ETCD_PEER_PORT}"
    path = base / "embed-etcd.yaml"
    path.write_text(f"listen-client-urls: {client}\nadvertise-client-urls: {client}\nlisten-peer-urls: {peer}\n"
                    f"initial-advertise-peer-urls: {peer}\ninitial-cluster: default={peer}\n")
    return path


def serve_milvus(base: Path) -> int:
    base.mkdir(parents=True, exist_ok=True)
    relay = socket.create_server(("127.0.0.1", 0))  # made before unsharing: it stays in the host's namespace
    try:
        unshare_loopback_only()
    except OSError as exc:
        _write_ready(base, {"error": f"no network namespace for Milvus: {exc}"})
        return NAMESPACE_REFUSED
    import milvus  # the wheel: only now, in the namespace

    server = milvus.MilvusServer()
    server.set_base_dir(str(base))
    server.listen_port = MILVUS_PORT
    server.config.update(etcd_port=ETCD_CLIENT_PORT)  # the embedded etcd listens there, whatever the template says
    server.config.set("etcd.endpoints", f"127.0.0.1:{ETCD_CLIENT_PORT}")
    for role in MILVUS_ROLES:
        server.config.set(f"{role}.ip", "127.0.0.1")
    os.environ["ETCD_CONFIG_PATH"] = str(_etcd_config(base))  # etcd.config.path: the template has no such key
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds to the `finally` below, which stops Milvus
    try:
        server.start()  # returns once it answers on the namespace's 127.0.0.1
        _write_ready(base, {"port": relay.getsockname()[1], "pid": os.getpid()})
        while True:
            client, _ = relay.accept()
            threading.Thread(target=_relay, args=(client,), daemon=True).start()
    finally:
        server.stop()


# --- reading a server's sockets ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InetSocket:
    pid: int
    name: str
    kind: str  # "tcp" | "udp"
    status: str  # psutil's: LISTEN, ESTABLISHED, ... ; NONE for UDP
    local: tuple[str, int]
    remote: tuple[str, int] | None
    loopback_only_namespace: bool  # the process's network namespace has no address but loopback

    def __str__(self) -> str:
        remote = f" -> {self.remote[0]}:{self.remote[1]}" if self.remote else ""
        return f"{self.name}[{self.pid}] {self.kind} {self.status} {self.local[0]}:{self.local[1]}{remote}"


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:127.0.0.1, a dual-stack socket's IPv4 peer
    return address


def is_loopback(text: str) -> bool:
    return _ip(text).is_loopback


def off_loopback(sock: InetSocket) -> list[str]:
    """The addresses of `sock` that are not loopback (127.0.0.0/8, ::1). A wildcard local address counts as
    loopback only in a namespace whose every address is loopback: there it cannot be reached any other way."""
    found = [] if is_loopback(sock.local[0]) else [sock.local[0]]
    if found and _ip(sock.local[0]).is_unspecified and sock.loopback_only_namespace:
        found = []
    if sock.remote and not is_loopback(sock.remote[0]):
        found.append(sock.remote[0])
    return found


def _read_here(pids: list[int]) -> list[dict[str, Any]]:
    import psutil

    addresses = [a.address for nic in psutil.net_if_addrs().values() for a in nic
                 if a.family in (socket.AF_INET, socket.AF_INET6)]
    loopback_only = all(is_loopback(a) for a in addresses)
    found: list[dict[str, Any]] = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            name, connections = process.name(), process.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # gone meanwhile (a short-lived worker): it has no sockets left to check
        for c in connections:
            found.append({"pid": pid, "name": name, "kind": "tcp" if c.type == socket.SOCK_STREAM else "udp",
                          "status": c.status, "local": [c.laddr.ip, c.laddr.port],
                          "remote": [c.raddr.ip, c.raddr.port] if c.raddr else None,
                          "loopback_only_namespace": loopback_only})
    return found


def _socket(row: dict[str, Any]) -> InetSocket:
    return InetSocket(pid=row["pid"], name=row["name"], kind=row["kind"], status=row["status"],
                      local=(row["local"][0], row["local"][1]),
                      remote=(row["remote"][0], row["remote"][1]) if row["remote"] else None,
                      loopback_only_namespace=row["loopback_only_namespace"])


def inet_sockets(root_pid: int) -> list[InetSocket]:
    """The TCP and UDP sockets of process `root_pid` and all its descendants, each with whether its network
    namespace has any address but loopback. psutil finds a process's sockets in /proc/net of the namespace it
    runs in, so each process is read here and, where it lives in another namespace, there too (by a fresh
    process that joins it): a process keeps the sockets it made before it moved, as the Milvus relay does."""
    import psutil

    root = psutil.Process(root_pid)
    pids = [root_pid, *(child.pid for child in root.children(recursive=True))]
    ours = os.readlink("/proc/self/ns/net")
    elsewhere: dict[str, list[int]] = {}
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            namespace = os.readlink(f"/proc/{pid}/ns/net")
            if namespace != ours:
                elsewhere.setdefault(namespace, []).append(pid)
    rows = _read_here(pids)
    for members in elsewhere.values():  # joining a namespace needs a single-threaded process: a fresh one
        result = subprocess.run([sys.executable, __file__, "sockets", *map(str, members)], capture_output=True,
                                text=True, check=True)
        rows += json.loads(result.stdout)
    return [_socket(row) for row in rows]


def main(argv: list[str]) -> int:
    if argv[:1] == ["milvus"] and len(argv) == 2:
        return serve_milvus(Path(argv[1]))
    if argv[:1] == ["sockets"] and len(argv) > 1:
        enter_network_namespace_of(int(argv[1]))
        print(json.dumps(_read_here([int(pid) for pid in argv[1:]])))
        return 0
    print("usage: loopback.py milvus DATA_DIR | sockets PID...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
