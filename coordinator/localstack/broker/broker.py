"""The life of one local Apache Kafka broker: start, wait until it answers, stop, clean.

Used by the test suite (one broker per session), by `myoloctl local up|down|status` and by the demo.
Everything another process needs to find a running broker is in the stack state file (state.py); the
broker's own files live in `<state dir>/kafka/`:

    broker.json        ports and cluster id, reused by every restart
    server.properties  rendered on each start
    data/              the log dirs (topics survive stop/start; `clean()` removes them)
    logs/server.log    the broker's log4j output; logs/stdout.log the JVM's own output
    security/          a secured broker's TLS files and users' passwords (``security.py``)
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from myolo.common.files import atomic_write
from myolo.coordinator.localstack.broker import config, jars, ports, process, security, state
from myolo.coordinator.localstack.broker.errors import BrokerError
from myolo.coordinator.localstack.broker.java import find_java
from myolo.coordinator.localstack.broker.probe import ClusterMetadata, ProbeError, answers_metadata

NAME = "kafka"
ROLE = "broker"
CLIENT_PORT = ("Kafka client port", "--port")  # what a message calls it, and the option that sets it
CONTROLLER_PORT = ("Kafka controller port", "--controller-port")
BIND_ATTEMPTS = 3  # first starts on fresh ports, when another process took a picked port before the JVM bound it
_BIND_FAILED = re.compile(r"^.*failed to bind to [^\s:]+:(\d+): Address already in use.*$", re.MULTILINE)
LOG4J_CONFIG = Path(__file__).with_name("log4j2.yaml")


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    bootstrap: str | None
    pid: int | None
    log: Path
    detail: str
    cluster_id: str | None = None
    security: str | None = None  # "SASL_SSL" or "SASL_PLAINTEXT" when secured


class LocalBroker:
    """One single-node KRaft broker (combined broker+controller) on 127.0.0.1.

    `port`/`controller_port` are only used the first time (afterwards broker.json holds them); `None`
    picks free ports. `tied_to_parent` makes the broker die with the Python process that started it
    (tests); the CLI leaves it False so the broker outlives `myoloctl local up`.

    `secure` sets a new broker up with SASL/SCRAM, the StandardAuthorizer and (with `tls`) TLS on its client
    listener; `users` (name -> role of myolo.events.acls) are created with it, and on every start their SCRAM
    credentials and ACLs are applied. A broker once secured stays secured (the stack state file records it).
    """

    def __init__(
        self,
        state_dir: Path | str | None = None,
        *,
        port: int | None = None,
        controller_port: int | None = None,
        heap: str = "512m",
        kafka_version: str | None = None,
        properties: dict[str, str] | None = None,
        tied_to_parent: bool = False,
        secure: bool = False,
        tls: bool = True,
        users: dict[str, security.Role] | None = None,
    ) -> None:
        if not re.fullmatch(r"[1-9]\d*[mMgG]", heap):
            raise BrokerError(f"heap size {heap!r} is not like 512m or 1g", hint="pass heap='512m' or '1g'")
        self.state_dir = Path(state_dir) if state_dir else state.default_state_dir()
        self.home = self.state_dir / NAME
        self._port, self._controller_port = port, controller_port
        self._heap = heap
        self._version = kafka_version
        self._properties = dict(properties or {})
        self._tied = tied_to_parent
        self._secure, self._tls, self._users = secure, tls, dict(users or {})
        self._sec: security.StackSecurity | None = None  # as found by start()
        self._proc: subprocess.Popen | None = None

    # -- paths and identity -------------------------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.home / "logs" / "server.log"

    @property
    def stdout_path(self) -> Path:
        return self.home / "logs" / "stdout.log"

    @property
    def properties_path(self) -> Path:
        return self.home / "server.properties"

    @property
    def security(self) -> security.StackSecurity | None:
        """How this broker is secured (None: plaintext), from the stack state file."""
        return state.load(self.state_dir).security

    @property
    def identity(self) -> config.BrokerIdentity | None:
        return config.load_identity(self.home / "broker.json")

    @property
    def bootstrap(self) -> str:
        """'127.0.0.1:PORT' of this broker; only known once it has been started (or configured) once."""
        identity = self.identity
        if identity is None:
            raise BrokerError(
                f"no local broker has been set up in {self.state_dir}", hint="run `myoloctl local up` first"
            )
        return identity.bootstrap

    # -- life ---------------------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> bool:
        """Start the broker and wait until it answers a Metadata request.

        Returns False (and starts nothing) when this state dir's broker already runs and answers. A first
        start picks free ports (those not given), which another process may take before the JVM binds them;
        then it starts again on fresh ones, up to BIND_ATTEMPTS times. A restart keeps its ports (clients
        reconnect there): one taken by another process is an error that names it.
        """
        with state.locked(self.state_dir):
            stack = state.load(self.state_dir)
            self._sec = self._prepare_security(stack)
            record = stack.find(NAME)
            if record and self._alive(record):
                self._wait_ready(record, timeout)
                self._apply_security(record.ports["client"])
                return False
            if record:
                stack.drop(NAME)
                state.save(self.state_dir, stack)
            java = find_java()
            lib = jars.ensure_jars(self._version or jars.kafka_version())
            first = self.identity is None  # a first start picks the ports; a restart keeps its own
            attempts = 0
            while True:
                attempts += 1
                identity = self._prepare_identity()
                try:
                    self._start_once(stack, java.executable, lib, identity, timeout)
                    self._apply_security(identity.port)
                    return True
                except ports.PortInUse as taken:
                    if first:  # a busy port is not remembered: the next start picks afresh
                        (self.home / "broker.json").unlink(missing_ok=True)
                    if not (first and taken.port in self._picked(identity)) or attempts == BIND_ATTEMPTS:
                        raise

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM the broker (SIGKILL after `timeout` s); data is kept. False if it was not running."""
        with state.locked(self.state_dir):
            stack = state.load(self.state_dir)
            record = stack.find(NAME)
            if record is None:
                return False
            outcome = process.terminate(record.pid, record.marker, timeout)
            self._reap()
            stack.drop(NAME)
            stack.bootstrap = None
            state.save(self.state_dir, stack)
            return outcome != "not running"

    def clean(self) -> None:
        """Stop the broker and delete its data, logs and identity."""
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)
        with state.locked(self.state_dir):
            stack = state.load(self.state_dir)
            if not stack.processes:
                (self.state_dir / state.STATE_FILE).unlink(missing_ok=True)
            elif stack.security is not None:
                stack.security = None  # its files went with the broker's folder
                state.save(self.state_dir, stack)

    def status(self) -> BrokerStatus:
        stack = state.load(self.state_dir)
        record = stack.find(NAME)
        if record is None:
            detail = "stopped (data kept)" if self.home.exists() else "not started"
            return BrokerStatus(False, None, None, self.log_path, detail)
        bootstrap = f"{ports.HOST}:{record.ports['client']}"
        if not self._alive(record):
            return BrokerStatus(False, bootstrap, record.pid, self.log_path, f"pid {record.pid} has exited")
        sec = stack.security
        meta = answers_metadata(ports.HOST, record.ports["client"], credentials=sec.credentials() if sec else None)
        if meta is None:
            detail = f"pid {record.pid} runs but does not answer on {bootstrap}"
            return BrokerStatus(False, bootstrap, record.pid, self.log_path, detail)
        protocol = sec.protocol if sec else None
        return BrokerStatus(True, bootstrap, record.pid, self.log_path, "running", meta.cluster_id, protocol)

    # -- steps --------------------------------------------------------------------------------------
    def _prepare_security(self, stack: state.StackState) -> security.StackSecurity | None:
        """Set a new broker up secured when asked, and make sure the requested users exist (state saved)."""
        if stack.security is None and self._secure:
            if self.identity is not None:
                raise BrokerError(
                    f"the broker in {self.home} was set up without security; it cannot be secured in place",
                    hint="`myoloctl local down --clean` removes it (and its topics), then `myoloctl local up --secure`",
                )
            stack.security = security.create(self.home / "security", use_tls=self._tls)
        if stack.security is None:
            return None
        for name, role in self._users.items():
            security.ensure_user(stack.security, name, role)
        state.save(self.state_dir, stack)
        return stack.security

    def _apply_security(self, port: int) -> None:
        if self._sec is None:
            return
        try:
            security.apply(self._sec, port)
        except ProbeError as exc:
            raise BrokerError(
                f"could not set up the users and ACLs of the broker on {ports.HOST}:{port}: {exc}",
                hint=f"read the log {self.log_path}",
            ) from exc

    def _alive(self, record: state.ProcessRecord) -> bool:
        if self._proc is not None and self._proc.pid == record.pid:
            return self._proc.poll() is None
        return process.alive(record.pid, record.marker)

    def _reap(self) -> None:
        if self._proc is not None:
            self._proc.wait(timeout=10)
            self._proc = None

    def _start_once(
        self, stack: state.StackState, java: Path, lib: Path, identity: config.BrokerIdentity, timeout: float
    ) -> None:
        """Launch on ``identity``'s ports and wait until the broker answers; PortInUse when one was taken,
        before the launch or by the time the JVM binds it."""
        ports.ensure_free(identity.port, *CLIENT_PORT)
        ports.ensure_free(identity.controller_port, *CONTROLLER_PORT)
        config.save_identity(self.home / "broker.json", identity)  # only ports that were free
        self._write_properties(identity)
        self._format_storage(java, lib, identity)
        logs_before = self._log_sizes()
        record = self._launch(java, lib, identity)
        stack.put(record)
        stack.bootstrap = identity.bootstrap
        state.save(self.state_dir, stack)
        try:
            self._wait_ready(record, timeout)
        except BrokerError as exc:
            process.terminate(record.pid, record.marker, timeout=10.0)
            self._reap()
            stack.drop(NAME)
            stack.bootstrap = None
            state.save(self.state_dir, stack)
            found = self._port_taken(identity, logs_before)
            if found is None:
                raise
            taken, line = found
            names = CLIENT_PORT if taken == identity.port else CONTROLLER_PORT
            # the line that says so first, then the logs as the reaped broker left them (the first ERROR of
            # the server log and the 30 lines after it need not reach the bind failure: seen in fresh-clone runs)
            raise ports.PortInUse(taken, *names, detail=f"{line.strip()}\n{self._log_tail()}") from exc

    def _picked(self, identity: config.BrokerIdentity) -> set[int]:
        """The ports of ``identity`` that we chose (not the caller's ``port``/``controller_port``)."""
        picked = set()
        if not self._port:
            picked.add(identity.port)
        if not self._controller_port:
            picked.add(identity.controller_port)
        return picked

    def _log_sizes(self) -> dict[Path, int]:
        return {path: path.stat().st_size if path.exists() else 0 for path in (self.log_path, self.stdout_path)}

    def _port_taken(self, identity: config.BrokerIdentity, logs_before: dict[Path, int]) -> tuple[int, str] | None:
        """The port of ``identity`` that this launch failed to bind because another process held it, and the log
        line saying so, from what the launch wrote to the broker's logs (both are appended to, start after
        start)."""
        for path, start in logs_before.items():
            try:
                with open(path, "rb") as handle:
                    handle.seek(start)
                    text = handle.read().decode("utf-8", "replace")
            except OSError:
                continue
            for match in _BIND_FAILED.finditer(text):
                if int(match[1]) in (identity.port, identity.controller_port):
                    return int(match[1]), match[0]  # the whole line
        return None

    def _prepare_identity(self) -> config.BrokerIdentity:
        path = self.home / "broker.json"
        identity = config.load_identity(path)
        if identity is None:
            shutil.rmtree(self.home / "data", ignore_errors=True)  # no identity: nothing worth keeping
            picked = ports.free_ports(2)
            identity = config.BrokerIdentity(
                port=self._port or picked[0],
                controller_port=self._controller_port or picked[1],
                cluster_id=config.new_cluster_id(),
            )
        elif self._port and self._port != identity.port:
            identity = config.BrokerIdentity(self._port, identity.controller_port, identity.cluster_id)
        return identity

    def _write_properties(self, identity: config.BrokerIdentity) -> None:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        extra = dict(self._properties)
        if self._sec is not None:
            extra = security.broker_properties(self._sec, identity.port, identity.controller_port) | extra
        body = config.render_properties(identity, self.home / "data", extra)
        # mode 0600: a secured broker's file holds the admin's password (its JAAS lines)
        atomic_write(self.properties_path, body.encode(), durable=False, mode=0o600)

    def _jvm(self, java: Path, lib: Path, heap: str) -> list[str]:
        return [
            str(java), f"-Xmx{heap}", "-Xms64m", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true", f"-Dkafka.logs.dir={self.home / 'logs'}",
            # Kafka logs its own shutdown from a JVM hook; log4j's hook would close the file first.
            "-Dlog4j2.shutdownHookEnabled=false", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            "-cp", f"{lib}/*",
        ]  # fmt: skip

    def _format_storage(self, java: Path, lib: Path, identity: config.BrokerIdentity) -> None:
        if (self.home / "data" / "meta.properties").exists():
            return
        cmd = [
            *self._jvm(java, lib, "256m"), "kafka.tools.StorageTool", "format", "-t", identity.cluster_id,
            "-c", str(self.properties_path), "--ignore-formatted",
            *(security.format_arguments(self._sec) if self._sec else []),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise BrokerError(
                f"formatting the broker's storage in {self.home / 'data'} failed (exit {proc.returncode})",
                hint=f"check the properties in {self.properties_path}; `myoloctl local down --clean` "
                "starts from scratch",
                detail=(proc.stdout + proc.stderr).strip()[-3000:],
            )

    def _launch(self, java: Path, lib: Path, identity: config.BrokerIdentity) -> state.ProcessRecord:
        cmd = [*self._jvm(java, lib, self._heap), "kafka.Kafka", str(self.properties_path)]
        self._proc = process.launch(cmd, cwd=self.home, output=self.stdout_path, tied_to_parent=self._tied)
        return state.ProcessRecord(
            name=NAME,
            role=ROLE,
            pid=self._proc.pid,
            marker=str(self.properties_path),
            log=str(self.log_path),
            ports={"client": identity.port, "controller": identity.controller_port},
            started_at=time.time(),
            info={"bootstrap": identity.bootstrap, "cluster_id": identity.cluster_id},
        )

    def _wait_ready(self, record: state.ProcessRecord, timeout: float) -> ClusterMetadata:
        deadline = time.monotonic() + timeout
        credentials = self._sec.credentials() if self._sec else None
        while True:
            meta = answers_metadata(ports.HOST, record.ports["client"], timeout=2.0, credentials=credentials)
            if meta is not None:
                return meta
            if not self._alive(record):
                code = self._proc.returncode if self._proc is not None else None
                raise BrokerError(
                    f"the Kafka broker exited while starting{'' if code is None else f' (status {code})'}",
                    hint=f"read the log {self.log_path}; `myoloctl local down --clean` starts from scratch",
                    detail=self._log_tail(),
                )
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"the Kafka broker (pid {record.pid}) did not answer on 127.0.0.1:"
                    f"{record.ports['client']} within {timeout:.0f} s",
                    hint=f"read the log {self.log_path}; a slow machine may need a longer timeout",
                    detail=self._log_tail(),
                )
            time.sleep(0.2)

    def _log_tail(self) -> str:
        parts = []
        server = _from_first_error(process.tail(self.log_path, 300), 30)
        if server:
            parts.append(f"last lines of {self.log_path}:\n{server}")
        jvm = process.tail(self.stdout_path, 15)
        if jvm:
            parts.append(f"last lines of {self.stdout_path}:\n{jvm}")
        return "\n".join(parts) or "(the broker wrote no log)"


def _from_first_error(text: str, count: int) -> str:
    """The log from its first ERROR/FATAL line (the cause; later lines are fallout), else its end."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if " ERROR " in line or " FATAL " in line), None)
    return "\n".join(lines[first : first + count] if first is not None else lines[-count:])
