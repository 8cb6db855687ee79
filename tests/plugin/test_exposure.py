"""The serving rules both HTTP servers share: loopback, the token, the bearer header."""

from __future__ import annotations

import pytest

from affect_memory.exposure import bearer_authorised, check_exposure, http_address, is_loopback
from affect_memory.kernel.errors import InvalidInputError

TOKEN = "s3cret-Token"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("127.3.2.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        (" localhost ", True),
        ("0.0.0.0", False),
        ("192.168.1.4", False),
        ("::", False),
        ("example.com", False),
        ("example.org", False),
    ],
)
def test_loopback_is_this_machine_only(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    if loopback:
        assert check_exposure(host, 0, None, token_env="MY_ENV") is None
    else:
        with pytest.raises(InvalidInputError, match="is not loopback"):
            check_exposure(host, 0, None, token_env="MY_ENV")
        assert check_exposure(host, 8765, TOKEN, token_env="MY_ENV") == TOKEN


@pytest.mark.parametrize(
    ("host", "port", "address"),
    [("127.0.0.1", 8080, "http://127.0.0.1:8080"), ("::1", 9, "http://[::1]:9")],
)
def test_an_address_shows_an_ipv6_host_in_brackets(host: str, port: int, address: str) -> None:
    assert http_address(host, port) == address


def test_a_public_host_needs_a_token_and_the_error_names_the_variable() -> None:
    with pytest.raises(InvalidInputError, match=r"--host '0\.0\.0\.0' is not loopback.*\$MY_ENV"):
        check_exposure("0.0.0.0", 80, None, token_env="MY_ENV")
    assert check_exposure("0.0.0.0", 80, TOKEN, token_env="MY_ENV") == TOKEN
    assert check_exposure("127.0.0.1", 0, None, token_env="MY_ENV") is None


@pytest.mark.parametrize("token", ["", "has space", "tab\there", "é"])
def test_a_token_that_cannot_travel_in_a_header_is_refused_without_showing_it(token: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        check_exposure("127.0.0.1", 0, token, token_env="MY_ENV")
    assert "not shown" in str(caught.value)
    if token:
        assert token not in str(caught.value)


@pytest.mark.parametrize("port", [-1, 65536, True, 8.0])
def test_a_port_outside_the_range_is_refused(port: object) -> None:
    with pytest.raises(InvalidInputError, match="--port must be between 0 and 65535"):
        check_exposure("127.0.0.1", port, None, token_env="MY_ENV")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "authorised"),
    [
        ([(b"authorization", b"Bearer " + TOKEN.encode())], True),
        ([(b"authorization", b"bEaReR " + TOKEN.encode())], True),
        ([(b"authorization", b"Bearer wrong")], False),
        ([(b"authorization", b"Bearer " + TOKEN.encode() + b"x")], False),
        ([(b"authorization", b"Basic " + TOKEN.encode())], False),
        ([(b"authorization", TOKEN.encode())], False),
        ([], False),
        ([(b"x-token", b"Bearer " + TOKEN.encode())], False),
        (
            [
                (b"authorization", b"Bearer " + TOKEN.encode()),
                (b"authorization", b"Bearer " + TOKEN.encode()),
            ],
            False,
        ),
    ],
)
def test_exactly_one_bearer_header_with_the_token_is_authorised(
    headers: list[tuple[bytes, bytes]], authorised: bool
) -> None:
    assert bearer_authorised(headers, TOKEN.encode()) is authorised
