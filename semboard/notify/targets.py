"""Where a task channel may send: http(s) URLs on public addresses, mail addresses; shown masked.

An organiser sets a webhook's URL, and the site then makes requests to it: without a check an
organiser could aim it at the site's own network (a database's HTTP port, a cloud metadata
service at 169.254.169.254) and read the answers in the delivery log (server-side request
forgery). So a URL must be http or https, carry no credentials, and name a host whose every
address is global; loopback, private, link-local, shared, multicast and reserved ranges are
refused unless the operator allows them (SEMBOARD_WEBHOOK_ALLOW_PRIVATE, e.g. a chat server on
the organisers' own network). The check runs when the channel is saved and again before each
delivery (an address's DNS may change in between); redirects are never followed.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from semboard.errors import InvalidData

SCHEMES = ("http", "https")
MAX_URL = 2000


def check_url(url: str, *, allow_private: bool) -> str:
    """The URL stripped, or InvalidData saying what is wrong with it (scheme, host, address)."""
    url = (url or "").strip()
    if not url:
        raise InvalidData("a webhook needs a URL")
    if len(url) > MAX_URL or any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise InvalidData("a webhook URL is one line of at most %(limit)s characters, "
                          "without spaces", limit=MAX_URL)
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        if not parts.scheme:
            raise InvalidData("a webhook URL must start with http:// or https://")
        raise InvalidData("a webhook URL must start with http:// or https://, not %(scheme)s:",
                          scheme=parts.scheme)
    if parts.username or parts.password:
        raise InvalidData("a webhook URL may not carry a user name or password")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as err:
        raise InvalidData("the webhook URL's port is not valid: %(error)s", error=str(err)) \
            from None
    if not host:
        raise InvalidData("a webhook URL must name a host")
    if not allow_private:
        for address in resolve(host, port or (443 if parts.scheme.lower() == "https" else 80)):
            if not is_public(address):
                raise InvalidData(
                    "%(host)s is at %(address)s, an address inside a private, loopback or "
                    "reserved range: the site does not send there (an operator can allow it "
                    "with SEMBOARD_WEBHOOK_ALLOW_PRIVATE)", host=host, address=address)
    return url


def resolve(host: str, port: int) -> list[str]:
    """Every address the host name resolves to (a literal address: itself); InvalidData when it
    does not resolve."""
    try:
        return [ipaddress.ip_address(host.strip("[]")).compressed]
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as err:
        raise InvalidData("the webhook's host %(host)s does not resolve: %(error)s", host=host,
                          error=str(err)) from None
    return sorted({str(info[4][0]).split("%")[0] for info in found})


# IPv6 prefixes that carry an IPv4 address a gateway forwards to (NAT64, RFC 6052 and 8215)
NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


def is_public(address: str) -> bool:
    """Whether an address is a global unicast one; an IPv6 address that carries an IPv4 one
    (IPv4-mapped, 6to4, NAT64) is judged by that IPv4 address too, so 2002:7f00:1:: or
    64:ff9b::a9fe:a9fe cannot reach loopback or the metadata service through a gateway."""
    ip = ipaddress.ip_address(address)
    judged: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            judged = [ip.ipv4_mapped]
        if ip.sixtofour is not None:
            judged.append(ip.sixtofour)
        if any(ip in net for net in NAT64):
            judged.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return all(a.is_global and not a.is_multicast for a in judged)


def check_address(address: str) -> str:
    """A mail channel's address: one line with one @, or InvalidData."""
    address = (address or "").strip()
    local, at, domain = address.rpartition("@")
    if not at or not local or "." not in domain or any(c.isspace() or c in "<>,;\"" for c in
                                                       address) or len(address) > 254:
        raise InvalidData("%(address)r is not an e-mail address", address=address)
    return address


def masked(target: str, kind: str) -> str:
    """What pages show of a channel's target: a URL's scheme and host (its path and query can
    hold the secret, as a Slack or Mattermost URL does), a mail address whole."""
    if kind == "mail":
        return target
    parts = urlsplit(target)
    shown = f"{parts.scheme}://{parts.netloc}"
    return shown + ("/…" if parts.path.strip("/") or parts.query else "/")
