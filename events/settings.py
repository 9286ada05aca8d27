"""How to reach Kafka: bootstrap address and security, as configuration, turned into aiokafka arguments.

The bootstrap comes from the config file or ``MYOLO_KAFKA_BOOTSTRAP``; ``local`` names the stack of
``myoloctl local up`` on this machine. A daemon told nothing refuses to start rather than guess a cluster;
``myoloctl``, on the operator's machine, asks for the local stack as its default. SASL_SSL / SASL_PLAINTEXT with SCRAM-SHA-512 and a CA file cover production clusters.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from myolo.common.errors import ConfigError
from myolo.events.limits import DEDUPE_WINDOW_IDS
from myolo.events.stackfile import local_bootstrap

LOCAL = "local"  # kafka.bootstrap: the local stack's address, read from its state file
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]


class KafkaSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The ``[kafka]`` section of every Myolotrain config file."""

    bootstrap: str = ""
    client_id: str = "myolo"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: str | None = None
    sasl_password_file: str | None = None
    ssl_ca_file: str | None = None
    ssl_cert_file: str | None = None
    ssl_key_file: str | None = None
    request_timeout_ms: int = 30_000
    # event ids each consumer remembers to drop redelivered duplicates (also capped at 24 MiB): the horizon of
    # the dedupe, and the memory it takes once full (about 190 bytes an id)
    dedupe_window_ids: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)] = DEDUPE_WINDOW_IDS

    def resolved_bootstrap(self, *, local_fallback: bool = False) -> str:
        """The bootstrap address: this setting, else the environment; the local stack's when either says
        ``local``, or when neither says anything and the caller asks for that fallback (``myoloctl``)."""
        given = self.bootstrap or os.environ.get("MYOLO_KAFKA_BOOTSTRAP", "")
        if given and given != LOCAL:
            return given
        if given == LOCAL or local_fallback:
            found = local_bootstrap()
            if found:
                return found
            raise ConfigError(
                "kafka.bootstrap",
                "no local stack is running on this machine; start one with `myoloctl local up`, or give the "
                "cluster's host:port (MYOLO_KAFKA_BOOTSTRAP, --bootstrap)",
            )
        raise ConfigError(
            "kafka.bootstrap",
            'no Kafka cluster given; set kafka.bootstrap = "host:9092" in the config file (or MYOLO_KAFKA_BOOTSTRAP), '
            f'or kafka.bootstrap = "{LOCAL}" for the stack of `myoloctl local up` on this machine',
        )

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments shared by aiokafka's producer, consumer and admin client."""
        kw: dict[str, Any] = {
            "bootstrap_servers": self.resolved_bootstrap(),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
        }
        if self.security_protocol in ("SSL", "SASL_SSL"):
            from aiokafka.helpers import create_ssl_context

            for key in ("ssl_ca_file", "ssl_cert_file", "ssl_key_file"):
                path = getattr(self, key)
                if path is not None and not Path(path).is_file():
                    raise ConfigError(f"kafka.{key}", f"file {path!r} does not exist")
            kw["ssl_context"] = create_ssl_context(
                cafile=self.ssl_ca_file, certfile=self.ssl_cert_file, keyfile=self.ssl_key_file
            )
        if self.security_protocol.startswith("SASL"):
            if not self.sasl_username:
                raise ConfigError("kafka.sasl_username", f"required with security_protocol={self.security_protocol}")
            kw.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=self._password(),
            )
        return kw

    def _password(self) -> str:
        if self.sasl_password_file:
            try:
                return Path(self.sasl_password_file).read_text().strip()
            except OSError as exc:
                raise ConfigError("kafka.sasl_password_file", f"cannot read: {exc.strerror}") from None
        if self.sasl_password is None:
            raise ConfigError("kafka.sasl_password", "required with SASL (or set kafka.sasl_password_file)")
        return self.sasl_password
