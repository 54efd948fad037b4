"""The HTTP API (`ragstead serve`)."""

from ragstead.api.app import ApiConfig, create_app

__all__ = ["ApiConfig", "create_app"]
