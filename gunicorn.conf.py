"""Read by gunicorn when it starts in this directory (``gunicorn dashboard.wsgi``): the
access log goes through a logger that removes credentials from request lines."""
logger_class = "dashboard.gunicorn_logging.ScrubbingLogger"
