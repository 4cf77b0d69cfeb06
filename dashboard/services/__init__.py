"""Writes. Every function that changes the database lives here (views, API routes,
commands and tasks call these; they never save models themselves)."""


class ServiceError(Exception):
    """A request the service refuses; ``status`` is the HTTP status the API answers with."""

    status = 400

    def __init__(self, detail, status: int | None = None):
        super().__init__(detail if isinstance(detail, str) else str(detail))
        self.detail = detail
        if status is not None:
            self.status = status


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class Invalid(ServiceError):
    status = 422
