"""The HTTP API (`ragstead serve`): the `server` extra. `ApiConfig` and `create_app` are imported when asked for
(PEP 562), so `ragstead keys` (api/keys.py) works on the core install, without FastAPI."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragstead.api.app import ApiConfig, create_app

__all__ = ["ApiConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ragstead.api import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
