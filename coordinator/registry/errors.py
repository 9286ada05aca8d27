"""The registry's refusals: each names the field at fault and says what to do."""

from __future__ import annotations

from myolo.coordinator.core.errors import Conflict, Invalid, NotFound


class RegistryError(Invalid):
    """A value the registry refuses: ``field`` (``retrain.manifest``, ``promote_margin``) and the reason."""

    def __init__(self, field: str, reason: str, hint: str | None = None) -> None:
        super().__init__(f"{field}: {reason}", field=field, hint=hint)
        self.reason = reason


class RegistryFull(Conflict, RegistryError):
    """A bound of the ``[registry]`` section would be passed (models, versions of a model, aliases)."""

    def __init__(self, field: str, reason: str) -> None:
        RegistryError.__init__(self, field, reason, "see the [registry] section's bounds")


class UnknownModel(NotFound):
    def __init__(self, model: str) -> None:
        self.model = model
        super().__init__(f"model {model!r} is not registered", field="model", hint="list them with GET /v1/models")


class UnknownVersion(Invalid, LookupError):
    """A version named in a request's body (a parent, an alias's target) that the model does not have."""

    def __init__(self, model: str, version: int, field: str = "version") -> None:
        self.model, self.version = model, version
        super().__init__(
            f"{field}: model {model} has no version {version} (myoloctl registry versions {model} lists them)",
            field=field,
            hint=f"GET /v1/models/{model}/versions lists them",
        )


class UnknownAlias(NotFound):
    def __init__(self, model: str, alias: str) -> None:
        self.model, self.alias = model, alias
        super().__init__(
            f"alias: model {model} has no alias {alias!r} (GET /v1/models/{model}/aliases lists them)", field="alias"
        )
