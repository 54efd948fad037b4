"""Hostile peers for `ingest`: a compression bomb, a server that drips a byte at a time, odd host spellings,
and a DNS answer that changes between the SSRF check and the connect. Every server here is on 127.0.0.1 and
every other name is answered by a fake resolver: nothing leaves the machine."""

from __future__ import annotations

import datetime
import gzip
import socket
import ssl
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpx
import pytest

from ragstead.ingest.base import SourceError
from ragstead.ingest.fetch import FetchOptions, fetch, make_client, network_transport
from ragstead.ingest.pipeline import ingest_sources
from ragstead.ingest.ssrf import blocked_address

PAGE = (b"<html><head><title>Otters</title></head><body><article><h1>Otters</h1>"
        + b"<p>The river otter census counted 412 otters along the upper valley this spring. " * 6
        + b"</p></article></body></html>")


@contextmanager
def raw_server(answer: Callable[[socket.socket, bytes], None],
               tls: ssl.SSLContext | None = None) -> Iterator[dict[str, Any]]:
    """A loopback server that hands each connection's request head to `answer(conn, head)`; yields its port
    and what it saw (connections, heads). With `tls`, each connection is TLS-wrapped first."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict[str, Any] = {"port": listener.getsockname()[1], "connections": 0, "heads": []}
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        if tls is not None:
            try:
                conn = tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):
                conn.close()
                return
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                piece = conn.recv(4096)
                if not piece:
                    return
                head += piece
            seen["heads"].append(head)
            with suppress(OSError):
                answer(conn, head)

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            seen["connections"] += 1
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(2)
        listener.close()


def _reply(conn: socket.socket, body: bytes, headers: str = "Content-Type: text/html\r\n") -> None:
    conn.sendall(f"HTTP/1.1 200 OK\r\n{headers}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                 + body)


class Target:
    """An ingest target that keeps what it is given."""

    name = "t"

    def __init__(self) -> None:
        self.stored: list[Any] = []

    def documents_from_source(self, key: str) -> list[dict[str, Any]]:
        return []

    def existing_tags(self) -> list[str]:
        return []

    def store_extracted(self, extracted: Any, source: Any, tags: list[str], replaces: Any) -> dict[str, Any]:
        self.stored.append(extracted)
        return {"doc_id": f"d{len(self.stored)}"}


# --- a compression bomb (#36.1) ------------------------------------------------------------------------------

BOMB_MB = 256
_bombs: dict[str, bytes] = {}


def _bomb(chain: str) -> bytes:
    """256 MB of zeros, compressed with each coding of `chain` in turn (a few hundred bytes to a few KB)."""
    if chain not in _bombs:
        data = bytes(BOMB_MB << 20)
        for coding in chain.split(", "):
            data = gzip.compress(data, 9, mtime=0) if coding == "gzip" else zlib.compress(data, 9)
        _bombs[chain] = data
    return _bombs[chain]


@pytest.mark.parametrize("chain", ["gzip, gzip", "deflate, gzip", "gzip"])
def test_a_compression_bomb_is_refused_at_the_cap_without_decoding_it(chain):
    body = _bomb(chain)
    assert len(body) < 300_000
    with raw_server(lambda conn, head: _reply(conn, body, f"Content-Type: text/html\r\nContent-Encoding: {chain}\r\n")
                    ) as seen:
        options = FetchOptions(max_bytes=1 << 20)
        with make_client(options) as client:
            tracemalloc.start()
            try:
                with pytest.raises(SourceError, match=r"over the 1 MB cap \(fetch_max_mb\)"):
                    fetch(client, f"http://127.0.0.1:{seen['port']}/bomb", options)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert peak < 16 << 20, f"decoding took {peak >> 20} MB for a 1 MB cap"  # it was the whole 256 MB and more


def test_a_gzipped_page_twice_over_still_decodes():
    body = gzip.compress(gzip.compress(PAGE))
    with raw_server(lambda conn, head: _reply(conn, body, "Content-Type: text/html\r\nContent-Encoding: gzip, gzip\r\n")
                    ) as seen:
        options = FetchOptions()
        with make_client(options) as client:
            assert fetch(client, f"http://127.0.0.1:{seen['port']}/", options).data == PAGE
        assert b"accept-encoding: gzip, deflate\r\n" in seen["heads"][0].lower()


def test_an_encoding_we_cannot_decode_with_a_bound_is_refused():
    with raw_server(lambda conn, head: _reply(conn, b"\x1b\x00", "Content-Encoding: br\r\n")) as seen:
        options = FetchOptions()
        with make_client(options) as client, pytest.raises(SourceError, match="unsupported Content-Encoding 'br'"):
            fetch(client, f"http://127.0.0.1:{seen['port']}/", options)


# --- a slow peer (#36.5) -------------------------------------------------------------------------------------

def _drip(conn: socket.socket, head: bytes) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n<html>")
    for _ in range(60):  # a byte every 0.5 s, for 30 s at most (so the test ends even without the deadline)
        time.sleep(0.5)
        conn.sendall(b" ")


def test_a_server_dripping_bytes_is_dropped_at_the_deadline():
    with raw_server(_drip) as seen:
        options = FetchOptions(deadline_seconds=2, read_seconds=30)
        started = time.monotonic()
        with make_client(options) as client, pytest.raises(SourceError, match=r"gave up after 2 s \(fetch_deadline"):
            fetch(client, f"http://127.0.0.1:{seen['port']}/", options)
        assert time.monotonic() - started < 10  # 2 s and the last byte's wait, not the server's 30 s


def test_the_deadline_covers_the_whole_redirect_chain():
    def slow_redirects(conn: socket.socket, head: bytes) -> None:
        time.sleep(0.8)
        hop = int(head.split(b" ")[1].strip(b"/") or 0)
        conn.sendall(f"HTTP/1.1 302 Found\r\nLocation: /{hop + 1}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                     .encode())

    with raw_server(slow_redirects) as seen:
        options = FetchOptions(deadline_seconds=2, read_seconds=30, max_redirects=8)
        with make_client(options) as client, pytest.raises(SourceError, match=r"gave up after 2 s"):
            fetch(client, f"http://127.0.0.1:{seen['port']}/0", options)
        assert seen["connections"] <= 4


# --- odd host spellings (#36.6) ------------------------------------------------------------------------------

ODD_HOSTS = ["0177.0.0.1", "127.000.000.001", "xn--zz.com", "xn--a.com", "\u2603.com", "\u0660.com"]


@pytest.mark.parametrize("allow_private", [False, True])
def test_odd_host_spellings_fail_one_line_each_and_the_batch_goes_on(allow_private):
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=PAGE,
                                                                    headers={"content-type": "text/html"}))
    target = Target()
    sources = [f"http://{host}/page" for host in ODD_HOSTS] + ["http://otters.example/census"]
    report = ingest_sources(sources, [target], transport=transport,
                            fetch_options=FetchOptions(allow_private=allow_private))
    lines = [r.line for r in report.results]
    assert all(line.startswith("failed: malformed URL") for line in lines[:-1]), lines
    # the good one is added (without the guard; with it, the reserved .example name does not resolve here)
    assert lines[-1] == ("added" if allow_private else "failed: DNS lookup failed for otters.example")


# --- SSRF at connect time (#35.5) ----------------------------------------------------------------------------

@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.1.2.3", "169.254.169.254", "0.0.0.0", "::1", "fe80::1", "fc00::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "::ffff:0:7f00:1",  # mapped, compatible, translated
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::5db8:d822",  # NAT64 (the local-use prefix is never public)
    "2002:7f00:1::1", "2002:a9fe:a9fe::",  # 6to4
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo whose client is 127.0.0.1
])
def test_addresses_that_reach_loopback_private_or_metadata_are_blocked(address):
    assert blocked_address(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700:4700::1111", "64:ff9b::5db8:d822",
                                     "2002:5db8:d822::1", "::ffff:93.184.216.34"])
def test_public_addresses_and_the_ipv6_forms_of_public_ipv4_pass(address):
    assert not blocked_address(address)


def test_an_ipv4_compatible_loopback_literal_is_refused():
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=PAGE))
    report = ingest_sources(["http://[::127.0.0.1]/"], [Target()], transport=transport,
                            fetch_options=FetchOptions(allow_private=False))
    assert report.results[0].line.startswith("failed: refused: ::127.0.0.1 resolves to a private or local address")


def test_a_dns_answer_that_changes_after_the_check_is_caught_at_connect():
    answers: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:  # public for the check, loopback for the connect
        answers.append(host)
        return ["93.184.216.34"] if len(answers) == 1 else ["127.0.0.1"]

    with raw_server(lambda conn, head: _reply(conn, PAGE)) as seen:
        options = FetchOptions(allow_private=False)
        with make_client(options, resolver=rebinding) as client, \
                pytest.raises(SourceError, match=r"refused: rebind\.test resolves to a private.*\(127\.0\.0\.1\)"):
            fetch(client, f"http://rebind.test:{seen['port']}/", options)
        assert seen["connections"] == 0
    assert answers == ["rebind.test", "rebind.test"]


def test_the_connection_goes_to_the_address_resolved_and_keeps_the_host_name():
    with raw_server(lambda conn, head: _reply(conn, PAGE)) as seen:
        options = FetchOptions(allow_private=True)
        resolved: list[str] = []

        def resolver(host: str, port: int) -> list[str]:
            resolved.append(host)
            return ["127.0.0.1"]

        with make_client(options, resolver=resolver) as client:
            fetched = fetch(client, f"http://otters.test:{seen['port']}/census", options)
        assert fetched.data == PAGE and resolved == ["otters.test"]
        assert f"host: otters.test:{seen['port']}\r\n".encode() in seen["heads"][0].lower()


def _self_signed(tmp_path, name: str) -> tuple[str, str]:
    """A key and a self-signed certificate for `name` (PEM files)."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_file, cert_file = tmp_path / "key.pem", tmp_path / "cert.pem"
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(key_file), str(cert_file)


def test_tls_verifies_and_names_the_url_host_while_connecting_to_the_checked_address(tmp_path):
    key_file, cert_file = _self_signed(tmp_path, "otters.test")
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert_file, key_file)
    sni: list[str | None] = []
    server_tls.sni_callback = lambda sock, name, context: sni.append(name)
    client_tls = ssl.create_default_context(cafile=cert_file)
    with raw_server(lambda conn, head: _reply(conn, PAGE), tls=server_tls) as seen:
        transport = network_transport(True, lambda host, port: ["127.0.0.1"], client_tls)
        with httpx.Client(transport=transport) as client:
            assert client.get(f"https://otters.test:{seen['port']}/").content == PAGE
            with pytest.raises(httpx.ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|match"):
                client.get(f"https://herons.test:{seen['port']}/")  # same address, a name the cert does not hold
    assert sni[0] == "otters.test"


def test_every_redirect_hop_connects_through_the_checked_resolver():
    def answer(conn: socket.socket, head: bytes) -> None:
        if head.lower().count(b"host: a.test"):
            port = head.lower().split(b"host: a.test:")[1].split(b"\r\n")[0].decode()
            conn.sendall(f"HTTP/1.1 302 Found\r\nLocation: http://b.test:{port}/page\r\nContent-Length: 0\r\n"
                         "Connection: close\r\n\r\n".encode())
        else:
            _reply(conn, PAGE)

    resolved: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        resolved.append(host)
        return ["127.0.0.1"]

    with raw_server(answer) as seen:
        options = FetchOptions(allow_private=True)
        with make_client(options, resolver=resolver) as client:
            fetched = fetch(client, f"http://a.test:{seen['port']}/", options)
        assert fetched.url == f"http://b.test:{seen['port']}/page" and fetched.data == PAGE
    assert resolved == ["a.test", "b.test"]  # each hop's connection resolved (and, with the guard, checked) once
