"""Agent side of coordinator commands: verify, fence epochs, execute each command id once, acknowledge."""

from myolo.agent.commands.args import ArgsError, command_args, current_command_id
from myolo.agent.commands.config import CommandsConfig, commands_state_dir, load_verifier
from myolo.agent.commands.consumer import AckingVerifier, SpooledAcks, build_command_consumer, command_group_id
from myolo.agent.commands.executor import ActionFn, CommandExecutor, ExecutorStats
from myolo.agent.commands.ledger import Ledger, LedgerError
from myolo.agent.commands.probe import nccl_probe_action

__all__ = [
    "AckingVerifier",
    "ActionFn",
    "ArgsError",
    "CommandExecutor",
    "CommandsConfig",
    "ExecutorStats",
    "Ledger",
    "LedgerError",
    "SpooledAcks",
    "build_command_consumer",
    "command_args",
    "command_group_id",
    "commands_state_dir",
    "current_command_id",
    "load_verifier",
    "nccl_probe_action",
]
