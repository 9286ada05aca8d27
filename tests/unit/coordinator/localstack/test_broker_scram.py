"""The local broker's SCRAM client (RFC 7677 vectors) and its nonce check, without a broker."""

from __future__ import annotations

import base64

import pytest

from myolo.coordinator.localstack.broker.scram import ScramClient, ScramError


def test_scram_client_matches_rfc_7677() -> None:
    client = ScramClient("user", "pencil", "SCRAM-SHA-256", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ScramError, match="signature is wrong"):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


def test_scram_client_refuses_a_server_nonce_that_is_not_ours() -> None:
    client = ScramClient("user", "pencil", nonce="abc")
    with pytest.raises(ScramError, match="nonce"):
        client.final(b"r=xyz123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
