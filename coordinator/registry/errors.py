"""The registry's refusals: each names the field at fault and says what to do (the API maps them to 4xx)."""

from __future__ import annotations


class RegistryError(ValueError):
    """A value the registry refuses: ``field`` (``retrain.manifest``, ``promote_margin``) and the reason."""

    def __init__(self, field: str, reason: str) -> None:
        self.field, self.reason = field, reason
        super().__init__(f"{field}: {reason}")


class RegistryFull(RegistryError):
    """A bound of the ``[registry]`` section would be passed (models, versions of a model, aliases)."""


class UnknownModel(LookupError):
    def __init__(self, model: str) -> None:
        self.model = model
        self.field = "model"
        super().__init__(f"model: no model named {model!r} (myoloctl registry models lists them)")


class UnknownVersion(LookupError):
    def __init__(self, model: str, version: int, field: str = "version") -> None:
        self.model, self.version, self.field = model, version, field
        super().__init__(
            f"{field}: model {model} has no version {version} (myoloctl registry versions {model} lists them)"
        )


class UnknownAlias(LookupError):
    def __init__(self, model: str, alias: str) -> None:
        self.model, self.alias = model, alias
        self.field = "alias"
        super().__init__(f"alias: model {model} has no alias {alias!r} (GET /v1/models/{model}/aliases lists them)")
