"""The agent's configuration: ``/etc/myolo/agent.toml`` plus ``MYOLO_*`` overrides, checked at start-up.

Loaded with :func:`myolo.common.config.load_config`, so every key can also come from the environment
(``spool.max_bytes`` -> ``MYOLO_SPOOL_MAX_BYTES``; the systemd unit's ``EnvironmentFile=`` uses this).
Paths left empty are resolved here, once, from systemd's directories (``STATE_DIRECTORY``,
``RUNTIME_DIRECTORY``) or the user's XDG directories, so the rest of the agent only sees absolute paths.

The top-level data directory is ``data_dir`` (``MYOLO_DATA_DIR``) rather than ``state_dir``, because
``MYOLO_STATE_DIR`` already names the local development stack's directory.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from myolo.agent.commands.config import CommandsConfig
from myolo.agent.identity.key import DEFAULT_NAME as NODE_KEY_NAME
from myolo.agent.identity.key import IdentityConfig
from myolo.agent.kernlog.config import KernelLogConfig
from myolo.agent.leak.config import LeakConfig
from myolo.agent.releases.config import ReleasesConfig
from myolo.agent.trainer.config import TrainerConfig
from myolo.common.config import load_config
from myolo.common.errors import ConfigError
from myolo.common.telemetry_settings import TelemetrySettings
from myolo.events.payloads.common import Host
from myolo.events.settings import KafkaSettings

Positive = Annotated[float, msgspec.Meta(gt=0)]
MiB = 1 << 20
_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
MAX_UNIX_PATH = 107  # sun_path holds 108 bytes including the terminating NUL


class SpoolConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where events wait while Kafka is away, and how much of the disk they may take."""

    dir: str = ""  # default: <data_dir>/spool
    max_bytes: Annotated[int, msgspec.Meta(ge=MiB)] = 256 * MiB
    segment_bytes: Annotated[int, msgspec.Meta(ge=4096)] = 4 * MiB
    # always: fsync every event (safest, most I/O); interval: at most every fsync_interval_s; never: leave it
    # to the kernel (an OS crash may lose the last seconds).
    fsync: Literal["always", "interval", "never"] = "interval"
    fsync_interval_s: Positive = 1.0


class HealthConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The HTTP endpoint: health (``GET /healthz``, ``POST /healthcheck``), workers' logs and metrics."""

    enabled: bool = True
    # GET /metrics: the last sample in dcgm-exporter's names and the agent's own (Prometheus text format)
    metrics: bool = True
    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8080
    # the spool counts as degraded above this share of its cap
    spool_degraded_fraction: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.8
    # POST /healthcheck reads the GPUs at most once per this many seconds; callers meanwhile share that read
    active_min_interval_s: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 2.0


class NcclConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """NCCL_DEBUG=INFO logs of the trainer processes on this node, followed as they grow."""

    log_globs: list[str] = []
    poll_interval_s: Positive = 1.0


class PublishConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How spooled events are sent to Kafka."""

    batch_records: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 500
    # how long one send may wait for the broker's acknowledgement before the agent counts Kafka as away
    send_timeout_s: Positive = 10.0
    retry_max_s: Positive = 5.0
    # READY=1 is sent once the first sample is in Kafka, or after this long with it safely spooled, so a node
    # whose broker is down still starts (and spools) instead of failing its start-up.
    ready_timeout_s: Positive = 15.0


class ProfileConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Profiles of trainer workers on demand (the ``profile`` command, ``GET /v1/profiles/{id}``)."""

    enabled: bool = True
    py_spy: str = ""  # the py-spy binary; default: beside the agent's Python, else on PATH
    dir: str = ""  # default: <data_dir>/profiles
    keep: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 10  # the newest kept; older ones are removed
    max_bytes: Annotated[int, msgspec.Meta(ge=1 << 16, le=1 << 34)] = 64 << 20  # one profile's folded stacks


class ProbeConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The bus-bandwidth probe: how it runs (for commands and the schedule) and when it runs on its own.

    The scheduled probe runs only on an idle node (every GPU's utilisation below ``idle_util_pct`` for the
    last ``idle_samples`` samples), at most once per ``idle_every_s``: a probe saturates the links, so it
    must never steal bandwidth from a trainer. 0 turns the schedule off (the default)."""

    idle_every_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    idle_util_pct: Annotated[float, msgspec.Meta(gt=0, le=100)] = 5.0
    idle_samples: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 30
    world_size: Annotated[int, msgspec.Meta(ge=0, le=64)] = 0  # 0: the node's GPU count (at least 2)
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    sizes: list[Annotated[int, msgspec.Meta(gt=0)]] = []  # empty: the probe's default sweep
    timeout_s: Positive = 300.0
    python: list[str] = []  # interpreter (argv) that has torch; default: the agent's own


class AgentConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The ``agent.toml`` file. See ``systemd/agent.toml`` for a commented example."""

    node_id: str = ""  # default: the host name
    # where other nodes reach this one (a job's rendezvous when its rank 0 runs here; the coordinator's view of
    # the health endpoint when it listens on all interfaces); default: 127.0.0.1 on simulated GPUs, else the
    # address the host name resolves to
    address: str = ""
    sample_interval_s: Positive = 1.0
    simulate_gpus: Annotated[int, msgspec.Meta(ge=0, le=64)] = 0
    data_dir: str = ""  # default: $STATE_DIRECTORY, else $XDG_STATE_HOME/myolo/agent
    control_socket: str = ""  # default: $RUNTIME_DIRECTORY/agent.sock, else <data_dir>/agent.sock
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    spool: SpoolConfig = msgspec.field(default_factory=SpoolConfig)
    publish: PublishConfig = msgspec.field(default_factory=PublishConfig)
    health: HealthConfig = msgspec.field(default_factory=HealthConfig)
    nccl: NcclConfig = msgspec.field(default_factory=NcclConfig)
    leak: LeakConfig = msgspec.field(default_factory=LeakConfig)
    kafka: KafkaSettings = msgspec.field(default_factory=KafkaSettings)
    commands: CommandsConfig = msgspec.field(default_factory=CommandsConfig)
    identity: IdentityConfig = msgspec.field(default_factory=IdentityConfig)
    probe: ProbeConfig = msgspec.field(default_factory=ProbeConfig)
    profile: ProfileConfig = msgspec.field(default_factory=ProfileConfig)
    kernel_log: KernelLogConfig = msgspec.field(default_factory=KernelLogConfig)  # NVRM: Xid lines
    trainer: TrainerConfig = msgspec.field(default_factory=TrainerConfig)
    releases: ReleasesConfig = msgspec.field(default_factory=ReleasesConfig)
    # OpenTelemetry: the metrics of GET /metrics under their OTel names (hw.*), pushed over OTLP when asked
    telemetry: TelemetrySettings = msgspec.field(default_factory=TelemetrySettings)


def load_agent_config(
    path: str | Path | None = None,
    *,
    env: dict[str, str] | None = None,
    simulate_gpus: int | None = None,
) -> AgentConfig:
    """Read, override from the environment, check, and resolve defaults. Raises :class:`ConfigError`."""
    cfg = load_config(path, AgentConfig, env=env)
    if simulate_gpus is not None:
        if simulate_gpus < 0 or simulate_gpus > 64:
            raise ConfigError("simulate_gpus", f"--simulate-gpus must be between 0 and 64, got {simulate_gpus}")
        cfg.simulate_gpus = simulate_gpus
    return resolve(cfg, env=os.environ if env is None else env)


def resolve(cfg: AgentConfig, *, env: dict[str, str] | os._Environ[str]) -> AgentConfig:
    """Fill in node id and paths, and check what a type alone cannot."""
    node_id = cfg.node_id or socket.gethostname().split(".")[0]
    if not _NODE_ID.match(node_id):
        raise ConfigError(
            "node_id",
            f"{node_id!r} is not a valid node id: use letters, digits, '.', '_' or '-' (up to 253 characters)",
        )
    data_dir = Path(cfg.data_dir or default_data_dir(env)).expanduser()
    spool_dir = Path(cfg.spool.dir).expanduser() if cfg.spool.dir else data_dir / "spool"
    sock = Path(cfg.control_socket).expanduser() if cfg.control_socket else default_socket(env, data_dir)
    if len(os.fsencode(str(sock))) > MAX_UNIX_PATH:
        raise ConfigError(
            "control_socket",
            f"path {str(sock)!r} is longer than the {MAX_UNIX_PATH} bytes a Unix socket path may have; "
            "set control_socket to a shorter path",
        )
    if cfg.spool.segment_bytes * 4 > cfg.spool.max_bytes:
        raise ConfigError(
            "spool.segment_bytes",
            f"{cfg.spool.segment_bytes} is more than a quarter of spool.max_bytes ({cfg.spool.max_bytes}); the cap "
            "drops whole segments, so lower segment_bytes or raise max_bytes",
        )
    if cfg.probe.world_size == 1:
        raise ConfigError("probe.world_size", "an all-reduce needs at least 2 ranks; use 0 (the GPU count) or >= 2")
    address = cfg.address or default_address(cfg.simulate_gpus > 0)
    check_host("address", address)
    if cfg.health.host:
        check_host("health.host", cfg.health.host)  # it is in the health endpoint's URL in every sample
    spool = msgspec.structs.replace(cfg.spool, dir=str(spool_dir))
    workers_dir = Path(cfg.trainer.workers_dir).expanduser() if cfg.trainer.workers_dir else data_dir / "workers"
    trainer = msgspec.structs.replace(cfg.trainer, workers_dir=str(workers_dir))
    profiles_dir = Path(cfg.profile.dir).expanduser() if cfg.profile.dir else data_dir / "profiles"
    node_key = Path(cfg.identity.key_file).expanduser() if cfg.identity.key_file else data_dir / NODE_KEY_NAME
    releases_dir = Path(cfg.releases.dir).expanduser()
    if not releases_dir.is_absolute():  # it is on the restarted agent's PYTHONPATH, whatever its cwd
        raise ConfigError("releases.dir", f"{cfg.releases.dir!r} is a relative path; give an absolute one")
    return msgspec.structs.replace(
        cfg,
        node_id=node_id,
        address=address,
        data_dir=str(data_dir),
        control_socket=str(sock),
        spool=spool,
        trainer=trainer,
        profile=msgspec.structs.replace(cfg.profile, dir=str(profiles_dir)),
        identity=IdentityConfig(key_file=str(node_key)),
        releases=msgspec.structs.replace(cfg.releases, dir=str(releases_dir)),
    )


def check_host(key: str, host: str) -> None:
    try:
        msgspec.convert(host, Host)
    except msgspec.ValidationError as exc:
        raise ConfigError(key, f"{host[:64]!r} is not a host name or IP address: {exc}") from None


def default_address(simulated: bool) -> str:
    """Simulated GPUs make a one-machine fleet: loopback. A real node: what its host name resolves to (a
    host whose name resolves to loopback, as Debian's ``127.0.1.1`` line does, needs ``address`` set)."""
    if simulated:
        return "127.0.0.1"
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError as exc:
        raise ConfigError(
            "address", f"the host name {name!r} does not resolve ({exc}); set address to this node's IP address"
        ) from None


def default_data_dir(env: dict[str, str] | os._Environ[str]) -> str:
    """systemd's ``StateDirectory=myolo`` sets STATE_DIRECTORY=/var/lib/myolo; interactive runs use XDG."""
    if env.get("STATE_DIRECTORY"):
        return env["STATE_DIRECTORY"].split(":")[0]
    xdg = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(xdg) / "myolo" / "agent")


def default_socket(env: dict[str, str] | os._Environ[str], data_dir: Path) -> Path:
    if env.get("RUNTIME_DIRECTORY"):
        return Path(env["RUNTIME_DIRECTORY"].split(":")[0]) / "agent.sock"
    return data_dir / "agent.sock"
