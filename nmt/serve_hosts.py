"""Where `nmt serve` listens and who may address it: the listening socket (one clear error before any model
loads), the Host names a request may use (DNS rebinding on loopback), and what the server says of its address."""

import errno
import ipaddress
import json
import re
import socket

from nmt.errors import NMTError


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def host_of(header: str) -> str:
    """The host name of a Host header, without its port ("[::1]:8000" → "::1")."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


_HOST_NAME = re.compile(r"[a-z0-9._-]+|[0-9a-f:.]+")  # a DNS name or IPv4 address, or an IPv6 address


def allowed_host_name(text: str) -> str:
    """An --allow-host value as a Host header's host compares with it (`host_of`: lower case, no port or brackets):
    `mt.example:8000` and `[::1]` never matched, and every request was refused. A URL or what is no name is an
    error."""
    if "://" in text:
        host = host_of(text.split("://", 1)[1].split("/", 1)[0])
        raise NMTError(f"--allow-host {text!r} is a URL: name its host alone ({host})")
    host = host_of(text)
    if not _HOST_NAME.fullmatch(host):
        raise NMTError(f"--allow-host {text!r} is no host name (e.g. mt.example, 10.0.0.5 or [::1], a port or not)")
    return host


def allowed_hosts(bind_host: str, extra: list[str]) -> set[str] | None:
    """Host names a request may address: on loopback the local names (and `extra`); elsewhere anything, unless
    `extra` names some. None: no check."""
    try:
        loopback = bind_host == "localhost" or ipaddress.ip_address(bind_host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return {*LOOPBACK_NAMES, bind_host.lower(), *(h.lower() for h in extra)}
    return {h.lower() for h in extra} or None


class HostCheck:
    """ASGI middleware: a request whose Host header names none of `hosts` is a 400 (DNS rebinding). Plain ASGI,
    not Starlette's BaseHTTPMiddleware: that one wraps `receive`, and a handler behind it cannot see its client
    hang up (`Request.is_disconnected` stays False)."""

    def __init__(self, app, hosts: set[str]):
        self.app, self.hosts = app, hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            host = host_of(dict(scope["headers"]).get(b"host", b"").decode("latin-1"))
            if host not in self.hosts:
                content = json.dumps({"detail": f"Host {host!r} is not served here (start nmt serve with "
                                                f"--allow-host {host} to accept it)"}).encode()
                await send({"type": "http.response.start", "status": 400,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(content)).encode())]})
                return await send({"type": "http.response.body", "body": content})
        await self.app(scope, receive, send)


def host_address(host: str) -> str:
    """--host as the socket takes it: an IPv6 address written as URLs write it, in brackets (`[::1]`, as the server's
    own line prints it), loses them; it was "not an address of this machine"."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def check_bind_address(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or one clear error (a bad address, a busy port) before any model loads."""
    if not host.strip():
        raise NMTError(f"--host {host!r} names no address: 0.0.0.0 serves on every interface (:: with IPv6), "
                       "127.0.0.1 on this machine only")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as err:
        raise NMTError(f"cannot serve on {host}: not an address of this machine ({err})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        privileged = err.errno == errno.EACCES and 0 < port < 1024
        hint = f" (ports below 1024 are root's: --port {port + 8000 if port < 1000 else 8000})" if privileged else ""
        raise NMTError(f"cannot listen on {host}:{port}: {err.strerror or err}{hint}") from None
    return sock


def exposure_notice(host: str, port: int) -> str | None:
    """What a server bound to every interface should say: other machines reach it, with no authentication, and
    0.0.0.0 is no address to open in a browser. None for a specific address."""
    try:
        everywhere = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        everywhere = host == ""
    if not everywhere:
        return None
    return (f"listening on every interface: any machine that reaches this one can use the server (it has no "
            f"authentication); open {server_url('127.0.0.1', port)} here")


def server_url(host: str, port: int) -> str:
    """The address to open: an IPv6 literal in brackets (http://[::1]:8000/), as URLs write it (RFC 3986), its zone's
    `%` written %25 (RFC 6874)."""
    return f"http://[{host.replace('%', '%25')}]:{port}/" if ":" in host else f"http://{host}:{port}/"
